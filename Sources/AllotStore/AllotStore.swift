// AllotStore — see README.md, "Architecture".
