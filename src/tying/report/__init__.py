"""Tables and figures from the metric and claims tables."""
