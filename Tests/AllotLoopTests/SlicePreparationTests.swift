import AllotProtocol
import Testing

@testable import AllotLoop

/// A publish that finds long-polls waiting encodes the plan gateways' slices before it makes the
/// version visible, so the wake-up only writes bytes; the prepared bytes are exactly the slices.
@Suite struct SlicePreparationTests {
    @Test func waitingLongPollsGetSlicesEncodedBeforeTheVersionIsVisible() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000, shares: ["gw-1": 0.75, "gw-2": 0.25])
        await harness.classifier.setDemand("globex", rpm: 50, tpm: 50_000, shares: ["gw-2": 1])
        await harness.tick()
        let publisher = harness.publisher
        let first = try #require(publisher.current)
        // Nobody was waiting for version 1: nothing was encoded ahead.
        #expect(!first.hasEncodedSlice(forGateway: "gw-1"))
        #expect(!first.hasEncodedSlice(forGateway: "gw-2"))

        // gw-2 polls too (a gateway that never polled is in no plan once another has).
        _ = await publisher.poll(gateway: "gw-2", condition: SnapshotCondition.parse("\"\(first.version)\""), wait: 0)
        let poll = Task {
            await publisher.poll(gateway: "gw-1", condition: SnapshotCondition.parse("\"\(first.version)\""), wait: 30)
        }
        await waitForWatchers(publisher, 1)
        await harness.classifier.setDemand("acme", rpm: 40, tpm: 20_000, shares: ["gw-1": 0.75, "gw-2": 0.25])
        await harness.tick(by: 1)
        guard case .modified(let snapshot, let body) = await poll.value else {
            Issue.record("expected the new version")
            return
        }
        #expect(snapshot.version > first.version)
        let gateways = snapshot.content.plan.gateways
        #expect(Set(gateways) == ["gw-1", "gw-2"])
        for gateway in gateways {
            #expect(snapshot.hasEncodedSlice(forGateway: gateway), "\(gateway) prepared")
            #expect(snapshot.body(forGateway: gateway) == snapshot.slice(forGateway: gateway).encoded())
        }
        #expect(body == snapshot.slice(forGateway: "gw-1").encoded())
        let slice = try Snapshot(decoding: body)
        #expect(slice.gateway == "gw-1")
        #expect(slice.tenant("globex") == nil)
        await harness.close()
    }
}
