// AllotTime — see README.md, "Architecture".
