// AllotHTTP — see README.md, "Architecture".
