import Foundation

/// Entry point of the `allot` executable.
public enum AllotCLI {
    public static func main() async {
        print("allot: not yet implemented")
    }
}
