extension StringProtocol {
    /// The text without leading and trailing white space (`Character.isWhitespace`: spaces,
    /// tabs, line ends and Unicode white space), without Foundation's internationalization part.
    /// Close to `trimmingCharacters(in: .whitespacesAndNewlines)` but by whole characters, not
    /// code points (a combining mark on a leading space goes with it; U+200B is kept): for
    /// messages and small system files, never for anything compared or stored.
    /// - Returns: The trimmed text.
    package func trimmingWhitespace() -> SubSequence {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace }) else {
            return self[endIndex...]
        }
        return self[first...last]
    }
}
