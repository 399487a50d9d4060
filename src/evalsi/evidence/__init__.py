"""Evidence bundles: what an agent run leaves behind for review, and its signature."""
