import X509

/// Certificates stored in the keychain serve as a trust policy's `keychain` anchors: the
/// certificates stored under a label (``IdentityStore/storeCertificates(_:label:accessibility:replace:)``)
/// are the anchors of that label.
extension IdentityStore: AnchorSource {
    /// The certificates stored under `label`.
    ///
    /// - Parameter label: The label the anchors were stored under (`tls import --certificates`).
    /// - Throws: ``IdentityError`` when no certificates are stored under `label` or they cannot be read.
    public func anchorCertificates(label: String) throws -> [Certificate] {
        try certificates(label: label)
    }
}
