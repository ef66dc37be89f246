// AllotSimulation — see README.md, "Architecture".
