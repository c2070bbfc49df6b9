"""Array-API compositions of every braze op: the test oracle and the fallback.

Each function here takes the same arguments as the public op (without ``out``)
and is written against the Python array API through ``array_api_compat``, so it
runs on numpy, torch, CuPy and JAX arrays on their own device. Arithmetic is
done in float32 ("f32 math"), or in float64 when the inputs are float64 (the
oracle the tests use); the result is cast once to the input dtype.
"""
