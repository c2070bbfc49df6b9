"""OpSpecs of each family (see braze._spec)."""
