"""What monitoring reports: the rules of Prometheus' client libraries and PromQL that turn a
process's observations into the numbers a dashboard (or the lab) shows."""
