"""End-to-end scenarios: real clients against a real local cluster; failover and scaling."""
