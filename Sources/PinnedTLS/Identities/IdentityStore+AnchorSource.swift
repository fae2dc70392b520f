/// Certificates stored in the keychain serve as a trust policy's `keychain` anchors: the
/// certificates stored under a label (``IdentityStore/anchorCertificates(label:)``) are the
/// anchors of that label.
extension IdentityStore: AnchorSource {}
