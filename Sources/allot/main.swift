import AllotCommands

// Kept tiny: globals here are main-actor isolated. Everything lives in AllotCommands.
await AllotCLI.main()
