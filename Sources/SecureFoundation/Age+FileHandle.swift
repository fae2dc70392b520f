import Foundation
import Age

// The age modules link FoundationEssentials only, which has no `FileHandle` (so the front
// program carries no ICU data: docs/ARCHITECTURE.md, "Foundation and ICU"); the `FileHandle`
// overloads live here, in the umbrella, which links all of Foundation. With `import Age` alone,
// pass `handle.fileDescriptor` to the descriptor overloads.
extension Age {
    /// Encrypts from one `FileHandle` to another (streaming, constant memory).
    /// - Parameters:
    ///   - input: Read to end of file.
    ///   - output: Where the age file is written.
    ///   - recipients: One or more recipients.
    ///   - armor: Write ASCII armor instead of binary.
    ///   - progress: Called as it goes with the input consumed so far.
    /// - Throws: `AgeError`.
    public static func encrypt(from input: FileHandle, to output: FileHandle, recipients: [any AgeRecipient],
                               armor: Bool = false, progress: Progress? = nil) throws(AgeError) {
        try encrypt(from: input.fileDescriptor, to: output.fileDescriptor, recipients: recipients, armor: armor, progress: progress)
    }

    /// Decrypts from one `FileHandle` to another (streaming, constant memory).
    /// - Parameters:
    ///   - input: The age file, read to end of file.
    ///   - output: Where the verified plaintext is written.
    ///   - identities: Keys and passphrases to try.
    ///   - armor: Armor handling (detected by default).
    ///   - progress: Called as it goes with the input consumed so far.
    /// - Throws: `AgeError`.
    public static func decrypt(from input: FileHandle, to output: FileHandle, identities: [any AgeIdentity],
                               armor: AgeArmorMode = .auto, progress: Progress? = nil) throws(AgeError) {
        try decrypt(from: input.fileDescriptor, to: output.fileDescriptor, identities: identities, armor: armor, progress: progress)
    }

}
