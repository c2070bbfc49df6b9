"""Framework integrations: ``braze.integrations.torch`` registers every op with torch.library."""
