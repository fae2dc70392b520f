import TestSupport

/// The shared private temporary directory, removed when the value goes away.
typealias TemporaryDirectory = TestSupport.TemporaryDirectory
