import Foundation
import Testing

/// Runs the real-browser test of the dashboard (`Tests/browser/dashboard_test.py`: headless
/// Chromium through Selenium against the built `allot serve`) as part of `swift test`.
///
/// It runs whenever Chromium, its driver and Selenium are installed (`.ci/run` installs them). When
/// they are missing it is skipped — unless `ALLOT_BROWSER_TEST=1` (set by `.ci/run`), where a
/// missing browser is a failure, so CI cannot pass without having run it.
@Suite struct DashboardBrowserTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static let required = ProcessInfo.processInfo.environment["ALLOT_BROWSER_TEST"] == "1"

    /// The `allot` executable built beside this test binary (or `ALLOT_BIN`).
    static var binary: String? {
        if let path = ProcessInfo.processInfo.environment["ALLOT_BIN"] { return path }
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [directory, directory.deletingLastPathComponent()] {
            let path = candidate.appendingPathComponent("allot").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    /// What is missing to run the browser test (empty when it can run).
    static var missing: [String] {
        var missing: [String] = []
        if !["/usr/bin/chromium", "/usr/bin/chromium-browser"].contains(where: FileManager.default.isExecutableFile) {
            missing.append("chromium (apt-get install chromium)")
        }
        if !FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver") {
            missing.append("chromedriver (apt-get install chromium-driver)")
        }
        if run(["python3", "-c", "import selenium"], timeout: 30).status != 0 {
            missing.append("selenium (pip install selenium)")
        }
        if binary == nil { missing.append("the built allot executable (swift build)") }
        return missing
    }

    static let available = missing.isEmpty

    @Test(.enabled(if: available || required, "needs chromium, chromium-driver and selenium"))
    func dashboardInARealBrowser() throws {
        let missing = Self.missing
        guard missing.isEmpty else {
            Issue.record(
                "ALLOT_BROWSER_TEST=1 but the browser test cannot run; missing: \(missing.joined(separator: ", "))")
            return
        }
        let script = Self.repository.appendingPathComponent("Tests/browser/dashboard_test.py").path
        let result = Self.run(["python3", script, "--bin", try #require(Self.binary)], timeout: 180)
        #expect(result.status == 0, "dashboard_test.py failed:\n\(result.output)")
        #expect(result.output.contains(" passed, 0 failed"), "\(result.output)")
    }

    /// Runs a command, returning its exit status and combined output; kills it after `timeout`.
    static func run(_ arguments: [String], timeout: Double) -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        do {
            try process.run()
        } catch {
            return (-1, "cannot run \(arguments.joined(separator: " ")): \(error)")
        }
        let deadline = Date().addingTimeInterval(timeout)
        let reader = DispatchQueue(label: "browser-test-output")
        nonisolated(unsafe) var data = Data()
        let done = DispatchSemaphore(value: 0)
        reader.async {
            data = pipe.fileHandleForReading.readDataToEndOfFile()
            done.signal()
        }
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
            done.wait()
            return (-1, String(decoding: data, as: UTF8.self) + "\n(killed after \(Int(timeout)) s)")
        }
        process.waitUntilExit()
        done.wait()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
