// AllotMetrics — see README.md, "Architecture".
