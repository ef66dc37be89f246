// AllotSignals — see README.md, "Architecture".
