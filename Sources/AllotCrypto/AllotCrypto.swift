// AllotCrypto — see README.md, "Architecture".
