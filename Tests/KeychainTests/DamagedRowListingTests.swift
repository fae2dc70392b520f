import Foundation
import TestSupport
import Testing
import Cipher
import Vault
@testable import Keychain

/// A row changed with the real `sqlite3` tool by someone who can write the keychain's file (a
/// column of the wrong SQLite type, a failed check, a key that is not an item id): the listing
/// gives every other item and names the damaged row with what is wrong; it used to fail whole.
@Suite struct DamagedRowListingTests {
    static let sqlite3 = ChildProcess.which("sqlite3")

    /// The keychain of a test: three good items and the victim, flushed and closed.
    private func prepare(_ dir: TemporaryDirectory, _ source: TestKeySource) throws -> (path: String, victim: String) {
        let keychain = try open(dir, source)
        try keychain.setPassword("one", forService: "svc", account: "a")
        try keychain.setPassword("victim", forService: "svc", account: "victim")
        try keychain.setPassword("two", forService: "svc", account: "b")
        try keychain.add(SecretBytes(utf8: "three"), for: .generic(service: "other", account: "c"), accessibility: .afterFirstUnlock)
        let victim = Encoding.hex(keychain.sealer.itemID(.generic(service: "svc", account: "victim")).bytes)
        let path = keychain.path
        try keychain.close()
        return (path, victim)
    }

    /// Runs `sql` on the file with the sqlite3 tool; nil (with the reason printed) when it is absent.
    private func edit(_ path: String, _ sql: String) throws -> Bool? {
        guard let tool = Self.sqlite3 else {
            print("skipped: the sqlite3 tool is not installed (apt-get install sqlite3)")
            return nil
        }
        let result = try ChildProcess.run(tool, [path, sql], timeout: .seconds(60))
        #expect(result.status == 0, "sqlite3: \(result.errorText)")
        return result.status == 0
    }

    @Test(arguments: [
        ("sealed = 'text where a blob belongs'", true),
        ("row_mac = 'text'", true),
        ("accessibility = 'always'", false),
        ("created = 'yesterday'", true),
        ("row_mac = randomblob(16)", true),
        ("sealed = substr(sealed, 1, 40)", true),
        ("accessibility = 99", false),
    ])
    func aDamagedRowIsReportedBesideTheOthers(assignment: String, summarised: Bool) throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let (path, victim) = try prepare(dir, source)
        guard try edit(path, "UPDATE keychain_items SET \(assignment) WHERE item_id = x'\(victim)'; SELECT changes();") == true else { return }
        let keychain = try open(dir, source)

        let listing = try keychain.listing()
        #expect(Set(listing.items.compactMap { $0.attributes?.key.account }) == ["a", "b", "c"])
        #expect(listing.items.count == 3)
        #expect(listing.damaged.count == 1)
        #expect(listing.damaged.first?.itemID == victim)
        #expect(listing.damaged.first?.itemClass == .genericPassword)
        #expect(listing.damaged.first?.error.isCorrupted == true, "\(listing.damaged)")
        #expect(listing.damaged.first?.accessibility == (summarised ? Accessibility.always : nil))

        // The accounts call names the damaged row rather than failing on it alone or skipping it.
        let error = keychainError { _ = try keychain.accounts(forService: "svc") }
        guard case .damagedItems(let items)? = error else {
            Issue.record("expected damagedItems, got \(String(describing: error))"); return
        }
        #expect(items.map(\.itemID) == [victim])
        #expect(error?.description.contains("item id \(victim)") == true)
        #expect(try keychain.accounts(forService: "other").map(\.account) == ["c"])

        // summaries(): a row whose class and accessibility read is listed without names; one
        // whose accessibility does not read is named in a typed error.
        if summarised {
            let summaries = try keychain.summaries()
            #expect(summaries.count == 4)
            #expect(summaries.filter { $0.attributes == nil }.count == 1)
            #expect(summaries.last?.unavailable?.isCorrupted == true)
        } else {
            guard case .damagedItems(let unlisted)? = keychainError({ _ = try keychain.summaries() }) else {
                Issue.record("summaries must name a row it cannot summarise"); return
            }
            #expect(unlisted.map(\.itemID) == [victim])
        }
        // The good items still read, and the damaged one can be deleted by its names.
        #expect(try keychain.password(forService: "svc", account: "a") == "one")
        try keychain.deletePassword(forService: "svc", account: "victim")
        #expect(try keychain.listing().damaged.isEmpty)
        #expect(try keychain.accounts(forService: "svc").map(\.account).sorted() == ["a", "b"])
        try keychain.close()
    }

    /// A row whose key is not an item id (TEXT), which no class or service range holds: the
    /// listing still reports it.
    @Test func aRowWhoseKeyIsNotAnItemIDIsReported() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let (path, victim) = try prepare(dir, source)
        guard try edit(path, "UPDATE keychain_items SET item_id = 'not an id' WHERE item_id = x'\(victim)';") == true else { return }
        let keychain = try open(dir, source)
        let listing = try keychain.listing()
        #expect(listing.items.count == 3)
        #expect(listing.damaged.count == 1)
        #expect(listing.damaged.first?.itemID == "\"not an id\"")
        #expect(listing.damaged.first?.itemClass == nil)
        #expect(listing.damaged.first?.error.isCorrupted == true)
        guard case .damagedItems? = keychainError({ _ = try keychain.summaries() }) else {
            Issue.record("summaries must name the row"); return
        }
        try keychain.close()
    }

    /// Several damaged rows are all named; a pending delete of one removes it from the report.
    @Test func everyDamagedRowIsNamed() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let (path, victim) = try prepare(dir, source)
        guard try edit(path, "UPDATE keychain_items SET sealed = 'x' WHERE item_id = x'\(victim)'; UPDATE keychain_items SET modified = 'x' WHERE item_id != x'\(victim)' AND created = (SELECT min(created) FROM keychain_items);") == true else { return }
        let keychain = try open(dir, source, interval: .seconds(3600))
        let listing = try keychain.listing()
        #expect(listing.damaged.count == 2, "\(listing.damaged)")
        #expect(listing.items.count == 2)
        try keychain.deletePassword(forService: "svc", account: "victim")
        #expect(try keychain.listing().damaged.count == 1)
        try keychain.close()
    }
}
