import AllotMetrics
import Testing

@Suite("Concurrency and cardinality caps")
struct ConcurrencyAndLimitTests {
    @Test("concurrent increments from many tasks sum exactly")
    func concurrentIncrements() async throws {
        let registry = MetricsRegistry()
        let total = try registry.counter("allot_events_total", help: "h")
        let byTenant = try registry.counter("allot_tenant_events_total", help: "h", labelNames: ["tenant"])
        let gauge = try registry.gauge("allot_inflight", help: "h")
        let histogram = try registry.histogram("allot_wait_seconds", help: "h", buckets: [0.5])
        let tasks = 32
        let perTask = 5_000
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    // Each task looks its handle up once and reuses it, as production code should;
                    // tasks share tenants, so children are created concurrently too.
                    let child = byTenant.labels("t\(task % 4)")
                    for i in 0..<perTask {
                        total.increment()
                        child.increment(by: 2)
                        gauge.increment()
                        gauge.decrement()
                        histogram.observe(i % 2 == 0 ? 0.25 : 1)
                    }
                }
                group.addTask {
                    // Renders racing with the writers must stay well-formed.
                    _ = try? ExpositionParser.parse(registry.render())
                }
            }
        }
        #expect(total.value == Double(tasks * perTask))
        for tenant in 0..<4 {
            #expect(byTenant.labels("t\(tenant)").value == Double(tasks / 4 * perTask * 2))
        }
        #expect(gauge.value == 0)
        let snapshot = histogram.snapshot
        #expect(snapshot.count == UInt64(tasks * perTask))
        #expect(snapshot.cumulativeCounts == [UInt64(tasks * perTask / 2), UInt64(tasks * perTask)])
        #expect(snapshot.sum == Double(tasks * perTask / 2) * 1.25)
        #expect(throws: Never.self) { try ExpositionParser.parse(registry.render()) }
    }

    @Test("concurrent registration of the same family yields one family")
    func concurrentRegistration() async throws {
        let registry = MetricsRegistry()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    let family = try! registry.counter("allot_shared_total", help: "h", labelNames: ["k"])
                    family.labels("v").increment()
                }
            }
        }
        #expect(registry.render().hasSuffix("allot_shared_total{k=\"v\"} 16\n"))
    }

    @Test("beyond the cap, new label sets fold into the other series and are counted")
    func cardinalityCap() throws {
        let registry = MetricsRegistry()
        let family = try registry.counter(
            "allot_tenant_requests_total", help: "Requests by tenant.", labelNames: ["tenant", "tier"],
            limit: CardinalityLimit(maxSeries: 2))
        family.labels("acme", "premium").increment()
        family.labels("globex", "free").increment()
        family.labels("initech", "free").increment(by: 5)  // folded
        family.labels("umbrella", "standard").increment(by: 7)  // folded
        family.labels("acme", "premium").increment()  // existing series still its own
        #expect(family.labels("initech", "free") === family.labels("umbrella", "standard"))
        #expect(
            registry.render() == """
                # HELP allot_tenant_requests_total Requests by tenant.
                # TYPE allot_tenant_requests_total counter
                allot_tenant_requests_total{tenant="acme",tier="premium"} 2
                allot_tenant_requests_total{tenant="globex",tier="free"} 1
                allot_tenant_requests_total{tenant="other",tier="other"} 12
                # HELP metrics_label_sets_folded_total Label-set lookups folded into the "other" series by a series cap.
                # TYPE metrics_label_sets_folded_total counter
                metrics_label_sets_folded_total{family="allot_tenant_requests_total"} 4

                """)
    }

    @Test("removing a series frees its place under the cap; the overflow series takes none")
    func capAfterRemoval() throws {
        let registry = MetricsRegistry()
        let family = try registry.gauge(
            "allot_tenant_allocation_rpm", help: "h", labelNames: ["tenant"], limit: CardinalityLimit(maxSeries: 1))
        family.labels("a").set(1)
        family.labels("b").set(2)  // folded into other
        family.remove("a")
        family.labels("c").set(3)  // admitted: a's place is free
        family.labels("d").set(4)  // folded again
        let lines = registry.render().split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(
            lines == [
                #"allot_tenant_allocation_rpm{tenant="c"} 3"#, #"allot_tenant_allocation_rpm{tenant="other"} 4"#,
                #"metrics_label_sets_folded_total{family="allot_tenant_allocation_rpm"} 2"#,
            ])
    }

    @Test("the folded-lookups family is absent while no family is capped")
    func noCapNoFoldedFamily() throws {
        let registry = MetricsRegistry()
        let family = try registry.counter("x_total", help: "h", labelNames: ["t"])
        for i in 0..<100 { family.labels("t\(i)").increment() }
        let text = registry.render()
        #expect(!text.contains("metrics_label_sets_folded_total"))
        #expect(text.split(separator: "\n").count == 102)
    }
}
