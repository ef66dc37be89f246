// AllotArguments — see README.md, "Architecture".
