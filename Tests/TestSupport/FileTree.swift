import Foundation

/// What a directory holds, for tests that check what a command or a crash left behind.
public enum FileTree {
    /// Every regular file under `directory`, recursively, sorted by name within each directory
    /// (symbolic links are not followed; an unreadable directory counts as empty).
    /// - Parameter directory: the directory to walk.
    /// - Returns: the files' paths, each starting with `directory`.
    public static func regularFiles(under directory: String) -> [String] {
        var result: [String] = []
        for name in ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted() {
            let path = directory + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            if info.st_mode & S_IFMT == S_IFDIR {
                result += regularFiles(under: path)
            } else if info.st_mode & S_IFMT == S_IFREG {
                result.append(path)
            }
        }
        return result
    }
}
