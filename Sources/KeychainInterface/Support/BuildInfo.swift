import CKeychainLinux

/// Which release a tool is and what it was built from, for `--version`: scripts/install.sh and
/// scripts/build-deb.sh stamp the VERSION file's release and the commit; a plain `swift build` says so.
public enum BuildInfo {
    public static var version: String { String(cString: ckeychain_version()) }
    public static var build: String { String(cString: ckeychain_build()) }

    /// `TOOL (swift-keychain) VERSION (BUILD)`, the line every tool's `--version` prints.
    public static func versionLine(for tool: String) -> String { "\(tool) (swift-keychain) \(version) (\(build))\n" }
}
