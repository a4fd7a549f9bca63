import Foundation

/// How the password key is derived; stored in the file so it can be raised later without a format break.
public struct KDFParameters: Sendable, Hashable {
    /// 1 = scrypt.
    public var id: Int
    public var n: Int
    public var r: Int
    public var p: Int

    /// scrypt N=2^17, r=8, p=1: about 0.3 s and 128 MiB per guess here (CRYPTO-DESIGN §4.5).
    public static let standard = KDFParameters(id: 1, n: 1 << 17, r: 8, p: 1)
    /// N=2^18: about 0.7 s and 256 MiB.
    public static let high = KDFParameters(id: 1, n: 1 << 18, r: 8, p: 1)

    public init(id: Int, n: Int, r: Int, p: Int) {
        self.id = id
        self.n = n
        self.r = r
        self.p = p
    }

    /// Files that ask for less than this are refused before the KDF runs (a downgrade).
    var isAcceptable: Bool { id == 1 && n >= 1 << 15 && n <= 1 << 20 && n.nonzeroBitCount == 1 && r >= 8 && r <= 16 && p >= 1 && p <= 4 }
}
