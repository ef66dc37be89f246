// AllotCore — see README.md, "Architecture".
