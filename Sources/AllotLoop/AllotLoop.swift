// AllotLoop — see README.md, "Architecture".
