import Foundation

/// The first column of the trust table in docs/SECURITY.md ("Trust table: every file the project
/// creates"), read when the test runs, as matchers of paths written `HOME/…`, `CONFIG/…` and
/// `RUNTIME/…`. A file the scenario finds that no row matches fails the matrix, so a new file
/// cannot be added without a row saying what vouches for it.
struct TrustTable {
    struct Row {
        /// The first cell, as written.
        let cell: String
        /// Its path patterns (`HOME/vault.state`, `HOME/.superseded-<12 alphanumerics>` …).
        let patterns: [String]
        let matchers: [NSRegularExpression]
        /// The row of files at paths the user names ("Protected files anywhere").
        let userNamed: Bool
    }

    let rows: [Row]

    /// The package's root directory (this file is Tests/TamperMatrixTests/TrustTable.swift).
    static var packageRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }

    struct Missing: Error, CustomStringConvertible {
        let description: String
    }

    static func load() throws -> TrustTable {
        let path = packageRoot + "/docs/SECURITY.md"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        guard let heading = text.range(of: "## Trust table") else { throw Missing(description: "\(path) has no \"## Trust table\" section") }
        let section = text[heading.upperBound...]
        let end = section.range(of: "\n## ")?.lowerBound ?? section.endIndex
        var rows: [Row] = []
        for line in section[..<end].split(separator: "\n") where line.hasPrefix("| ") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false)
            guard cells.count > 2 else { continue }
            let cell = cells[1].trimmingCharacters(in: .whitespaces)
            let patterns = Self.backticked(cell).compactMap(Self.normalized)
            let userNamed = cell.hasPrefix("Protected files anywhere")
            guard !patterns.isEmpty || userNamed else { continue }
            rows.append(Row(cell: cell, patterns: patterns, matchers: try patterns.map(Self.matcher), userNamed: userNamed))
        }
        guard rows.count > 10 else { throw Missing(description: "\(path): the trust table has only \(rows.count) rows with paths") }
        return TrustTable(rows: rows)
    }

    /// The row matching `path` (written `HOME/…`, `CONFIG/…`, `RUNTIME/…`; a directory ends with
    /// `/`), or nil. `userNamed` are the paths the scenario gave to `protect write` and their
    /// directory: the row "Protected files anywhere" covers them.
    func row(for path: String, userNamed: Set<String>) -> Row? {
        if userNamed.contains(path), let row = rows.first(where: \.userNamed) { return row }
        let range = NSRange(path.startIndex..., in: path)
        return rows.first { row in row.matchers.contains { $0.firstMatch(in: path, range: range) != nil } }
    }

    private static func backticked(_ cell: String) -> [String] {
        var result: [String] = []
        var current: String?
        for character in cell {
            if character == "`" {
                if let value = current { result.append(value); current = nil } else { current = "" }
            } else if current != nil {
                current!.append(character)
            }
        }
        return result
    }

    /// Keeps the patterns of the three directories; `KEYFILE.rotating` ("beside the device-key
    /// file") is the device key's name in CONFIG.
    private static func normalized(_ pattern: String) -> String? {
        if pattern.hasPrefix("HOME/") || pattern.hasPrefix("CONFIG/") || pattern.hasPrefix("RUNTIME/") { return pattern }
        if pattern.hasPrefix("KEYFILE") { return "CONFIG/device.key" + pattern.dropFirst("KEYFILE".count) }
        return nil
    }

    /// `<12 alphanumerics>` → 12 letters or digits, `<16 hex digits …>` → 16 hex digits,
    /// `<vault id, hex>` → hex digits, another `<…>` or `NAME` → one path component, `…` → anything.
    static func matcher(_ pattern: String) throws -> NSRegularExpression {
        var regex = "^"
        var index = pattern.startIndex
        while index < pattern.endIndex {
            let character = pattern[index]
            if character == "<", let close = pattern[index...].firstIndex(of: ">") {
                let inside = pattern[pattern.index(after: index)..<close]
                let count = inside.prefix(while: \.isNumber)
                if inside.contains("alphanumerics"), !count.isEmpty {
                    regex += "[A-Za-z0-9]{\(count)}"
                } else if inside.contains("hex digits"), !count.isEmpty {
                    regex += "[0-9a-f]{\(count)}"
                } else if inside.contains("hex") {
                    regex += "[0-9a-f]+"
                } else {
                    regex += "[^/]+"
                }
                index = pattern.index(after: close)
            } else if pattern[index...].hasPrefix("NAME") {
                regex += "[^/]+"
                index = pattern.index(index, offsetBy: 4)
            } else if character == "…" {
                regex += ".*"
                index = pattern.index(after: index)
            } else {
                regex += NSRegularExpression.escapedPattern(for: String(character))
                index = pattern.index(after: index)
            }
        }
        return try NSRegularExpression(pattern: regex + "$")
    }
}
