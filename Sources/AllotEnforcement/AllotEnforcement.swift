// AllotEnforcement — see README.md, "Architecture".
