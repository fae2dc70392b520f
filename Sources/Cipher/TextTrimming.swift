extension StringProtocol {
    /// The text without leading and trailing white space (`Character.isWhitespace`: spaces,
    /// tabs, line ends and Unicode white space), as `trimmingCharacters(in:
    /// .whitespacesAndNewlines)` returns it, without Foundation's internationalization part.
    /// - Returns: The trimmed text.
    package func trimmingWhitespace() -> SubSequence {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace }) else {
            return self[endIndex...]
        }
        return self[first...last]
    }
}
