import Foundation
import GRDB
import KeychainCore
import KeychainStorage
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Format 2 (audit findings): the manifest covers rowids and index columns, indexes are keyed per class,
/// metadata is padded to a size bucket.
@Suite("File format 2")
struct FormatTwoTests {
    func tamper(_ t: TestFile, _ body: (Database) throws -> Void) throws { try t.tamper(body) }

    /// Two items, the file closed (so the tampering lands on a file nobody holds).
    func twoItems() throws -> TestFile {
        let t = try TestFile.twoItems()
        t.file.close()
        return t
    }

    @Test("swapping two rows' rowids (which reorders results) is refused at open")
    func rowidSwap() throws {
        let t = try twoItems()
        try tamper(t) { db in
            try db.execute(sql: "UPDATE items SET rowid = 100 WHERE rowid = 1")
            try db.execute(sql: "UPDATE items SET rowid = 1 WHERE rowid = 2")
            try db.execute(sql: "UPDATE items SET rowid = 2 WHERE rowid = 100")
        }
        #expect(status { try t.reopen() } == -26275)
    }

    @Test("swapping two rows' account index values (which hides items) is refused at open")
    func indexSwap() throws {
        let t = try twoItems()
        try tamper(t) { db in
            let a: Data = try Data.fetchOne(db, sql: "SELECT account_index FROM items WHERE rowid = 1")!
            let b: Data = try Data.fetchOne(db, sql: "SELECT account_index FROM items WHERE rowid = 2")!
            try db.execute(sql: "UPDATE items SET account_index = ? WHERE rowid = 1", arguments: [b])
            try db.execute(sql: "UPDATE items SET account_index = ? WHERE rowid = 2", arguments: [a])
        }
        #expect(status { try t.reopen() } == -26275)
    }

    @Test("editing any index value is refused at open", arguments: ["account_index", "service_index", "group_index"])
    func indexEdits(column: String) throws {
        let t = try twoItems()
        try tamper(t) { db in try db.execute(sql: "UPDATE items SET \(column) = randomblob(16) WHERE rowid = 1") }
        #expect(status { try t.reopen() } == -26275)
    }

    @Test("a generic and an internet password for one account have different index values")
    func perClassIndexes() throws {
        let t = try TestFile(password: nil)
        try t.add(["class": "genp", "acct": "alice"])
        try t.add(["class": "inet", "acct": "alice"])
        t.file.close()
        let queue = try DatabaseQueue(path: t.url.path)
        let values = try queue.read { db in try Data.fetchAll(db, sql: "SELECT account_index FROM items") }
        #expect(values.count == 2 && values[0] != values[1])
        let groups = try queue.read { db in try Data.fetchAll(db, sql: "SELECT group_index FROM items") }
        #expect(groups[0] != groups[1])
    }

    @Test("metadata ciphertexts fall into size buckets, not the attributes' exact length")
    func metadataPadding() throws {
        let t = try TestFile(password: nil)
        try t.add(["class": "genp", "acct": "a", "labl": "x"])
        try t.add(["class": "genp", "acct": "b", "labl": .string(String(repeating: "y", count: 60))])
        try t.add(["class": "genp", "acct": "c", "labl": .string(String(repeating: "z", count: 400))])
        t.file.close()
        let queue = try DatabaseQueue(path: t.url.path)
        let sizes = try queue.read { db in try Data.fetchAll(db, sql: "SELECT meta FROM items ORDER BY rowid").map(\.count) }
        // AES-GCM adds a 12-byte nonce and a 16-byte tag to a plaintext of 256, 512, 1024, ... bytes.
        for size in sizes {
            let plaintext = size - 28
            #expect(plaintext >= 256 && plaintext.nonzeroBitCount == 1, "\(size)")
        }
        #expect(sizes[2] > sizes[0])
        try t.reopen()
        #expect(try t.search(["class": "genp", "acct": "c", "r_Attributes": true]).first?.item.attributes["labl"]
                == .string(String(repeating: "z", count: 400)))
    }

    @Test("a format-2 file claiming to be format 1 is refused (the MAC covers the format)")
    func formatDowngrade() throws {
        let t = try twoItems()
        try tamper(t) { db in try db.execute(sql: "UPDATE kc_meta SET format = 1") }
        #expect(status { try t.reopen() } == -26275)
    }
}

@Suite("Every open reads every row")
struct EveryOpenScansTests {
    /// Versions that skipped the row scan when the files' ctime matched the one recorded at close missed an edit
    /// of the same size made within the close's clock tick. The edit here is made as fast as possible after the
    /// close, so that it often lands in that tick; it must be caught every time.
    @Test("a same-size edit of an index value right after a clean close is caught at the next open")
    func sameSizeEditInSameTick() throws {
        var sameTickEdits = 0
        for _ in 0..<20 {
            let t = try TestFile(password: nil)
            try t.add(["class": "genp", "acct": "a", "svce": "s"])
            try t.add(["class": "genp", "acct": "b", "svce": "s"])
            let index = try DatabaseQueue(path: t.url.path).read { db in
                try Data.fetchOne(db, sql: "SELECT account_index FROM items WHERE rowid = 1")!
            }
            var bytes = fileBytes(t.url.path + "-wal") + fileBytes(t.url.path)  // warm the page cache
            t.file.close()
            bytes = fileBytes(t.url.path)
            let offset = try #require(firstOffset(of: Array(index), in: bytes))
            var before = stat()
            stat(t.url.path, &before)
            // The edit: one byte of an index value, in place; the file keeps its size.
            let fd = open(t.url.path, O_WRONLY)
            bytes[offset] ^= 0xFF
            _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + offset, 1, off_t(offset)) }
            close(fd)
            var after = stat()
            stat(t.url.path, &after)
            if before.st_ctim.tv_sec == after.st_ctim.tv_sec && before.st_ctim.tv_nsec == after.st_ctim.tv_nsec {
                sameTickEdits += 1
            }
            #expect(status { try t.reopen() } == -26275)
        }
        print("same-size edits within the close's clock tick (all caught): \(sameTickEdits) of 20")
    }

    func firstOffset(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard needle.count <= haystack.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if Array(haystack[i..<i + needle.count]) == needle { return i }
        }
        return nil
    }
}
