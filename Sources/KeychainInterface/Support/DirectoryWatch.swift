#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Tells, with one `read(2)` and no path lookup, whether anything in a few directories may have changed since a
/// value was worked out from them: the keychain service looks at its preference files and at whether the default
/// keychain's file still exists on every call that names no keychain, and the `stat` and `access` calls for that were
/// a third of an in-process `SecItemCopyMatching`.
///
/// One inotify descriptor for the process. Each directory a caller names is watched, or, while it does not exist,
/// its nearest existing ancestor (whatever makes it appear adds an entry there). Every event from any of them moves
/// ``stamp(covering:_:)`` on; a value kept with a stamp is still right while the stamp is the same. The kernel queues
/// an event before the call that changed the file returns, so a change that another process made before it told us
/// anything is seen at our next call, as a `stat` would see it.
///
/// A watched directory that is renamed or removed is watched again at its path. Not noticed: a directory above a
/// watched one renamed, a symbolic link above it pointed elsewhere, or a file system mounted over it (the watch stays
/// on what was there). A directory that is itself a symbolic link is not watched. Where inotify is not available (no
/// descriptor left, too many watches) or a directory is not watched, ``stamp(covering:_:)`` says nil and callers look
/// at the files themselves.
package final class DirectoryWatch: Sendable {
    /// The process's watch.
    package static let shared = DirectoryWatch()

    /// What makes a directory's stamp move: entries made, removed or renamed, files written or their mode changed,
    /// and the directory itself removed or renamed.
    private static let contentMask = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE
        | IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_MASK_ADD)
    /// For a directory whose entries' existence alone matters (the keychains' own: SQLite writes there all the time).
    private static let entriesMask = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB
        | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_MASK_ADD)

    package enum Interest: Sendable {
        /// The directory's files' contents matter.
        case contents
        /// Only which entries it has.
        case entries
    }

    private struct Key: Hashable {
        var path: String
        var interest: Interest
    }

    private struct Watched {
        /// The watch descriptor, and whether it is on the directory itself or only on an ancestor.
        var descriptor: Int32
        var onAncestor: Bool
        /// The stamp when it was placed: a watch on an ancestor is placed again after any event, which may be the
        /// directory appearing.
        var placedAt: UInt64
    }

    private struct State {
        var descriptor: Int32 = -1
        var started = false
        /// ``forks`` when the descriptor was made.
        var forks = 0
        var unavailable = false
        /// Moves on at every batch of events. (Placing a watch need not move it: a watch is placed again only after
        /// an event said the old one was gone or the directory may have appeared, and that event moved it.)
        var stamp: UInt64 = 0
        var watched: [Key: Watched] = [:]
        /// The watch descriptors the kernel dropped (a directory removed): directories on them are placed again.
        var dropped: Set<Int32> = []
    }

    private let state = Mutex(State())
    /// Counts forks, in the child: there the descriptor is shared with the parent, and a read by the child would take
    /// events the parent needs, so the child makes a descriptor of its own at its next look.
    private static let forks = Atomic(0)
    private static let atForkInstalled: Bool = {
        pthread_atfork(nil, nil) { _ = DirectoryWatch.forks.add(1, ordering: .relaxed) } == 0
    }()

    package init() {}

    deinit {
        state.withLock { if $0.descriptor >= 0 { close($0.descriptor) } }
    }

    /// A number that stays the same while nothing changed in `directory` (an absolute path), or nil when it cannot
    /// be watched. Compare it with the one taken before the value kept was worked out; the number is the process's,
    /// so it also moves at changes in other watched directories.
    package func stamp(covering directory: String, _ interest: Interest) -> UInt64? {
        guard directory.hasPrefix("/") else { return nil }
        return state.withLock { state -> UInt64? in
            guard start(&state) else { return nil }
            drain(&state)
            return place(directory, interest: interest, &state) ? state.stamp : nil
        }
    }

    /// The stamp now, after reading the events queued; nil when nothing can be watched. A value kept with what
    /// ``stamp(covering:_:)`` gave for each of its directories is still right while this gives the same number.
    package func stamp() -> UInt64? {
        state.withLock { state -> UInt64? in
            guard start(&state) else { return nil }
            drain(&state)
            return state.stamp
        }
    }

    private func start(_ state: inout State) -> Bool {
        let forks = Self.forks.load(ordering: .relaxed)
        if state.started, state.forks != forks {
            // In a forked child: the parent's descriptor is left to the parent, and not closed (the child may have
            // closed it and reused its number already; exec closes it).
            state = State(stamp: state.stamp &+ 1)
        }
        if state.started { return !state.unavailable }
        state.started = true
        state.forks = forks
        guard Self.atForkInstalled else {
            state.unavailable = true
            return false
        }
        state.descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        state.unavailable = state.descriptor < 0
        return !state.unavailable
    }

    /// Reads every event queued so far; any moves the stamp on.
    private func drain(_ state: inout State) {
        let size = 4096
        withUnsafeTemporaryAllocation(byteCount: size, alignment: 8) { buffer in
            while true {
                let got = read(state.descriptor, buffer.baseAddress, size)
                if got <= 0 { break }
                state.stamp &+= 1
                var offset = 0
                // struct inotify_event: wd, mask, cookie, len, then len bytes of name.
                while offset + 16 <= got {
                    let base = buffer.baseAddress! + offset
                    let wd = base.loadUnaligned(as: Int32.self)
                    let mask = base.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
                    let length = Int(base.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
                    if mask & UInt32(IN_IGNORED) != 0 { state.dropped.insert(wd) }
                    if mask & UInt32(IN_MOVE_SELF | IN_DELETE_SELF) != 0 {
                        // A moved directory keeps its watch under its new name: what is at the old path now is not
                        // watched by it.
                        state.dropped.insert(wd)
                        inotify_rm_watch(state.descriptor, wd)
                    }
                    if mask & UInt32(IN_Q_OVERFLOW) != 0 { state.dropped.insert(-1) }
                    offset += 16 + length
                }
            }
        }
    }

    /// Makes sure `path` is covered: by a watch on it or, while it does not exist, on its nearest existing ancestor.
    private func place(_ path: String, interest: Interest, _ state: inout State) -> Bool {
        let key = Key(path: path, interest: interest)
        if !state.dropped.isEmpty {
            // A dropped descriptor may be handed out again by the kernel: forget every directory that was on one (an
            // overflow may have lost the news of any of them).
            let dropped = state.dropped
            let all = dropped.contains(-1)
            state.watched = state.watched.filter { !all && !dropped.contains($0.value.descriptor) }
            state.dropped.removeAll()
        }
        if let known = state.watched[key], !known.onAncestor || known.placedAt == state.stamp { return true }
        // A directory made between a failed watch on it and the watch on its parent would go unseen: once the parent
        // is watched, the child is looked for again, and if it is there now, placing starts over.
        for _ in 0..<8 {
            var candidate = path
            var child: String?
            while true {
                // A directory that is a symbolic link is not watched: the watch would stay on the link's old target
                // when the link is pointed elsewhere (and a dangling one would look like a directory yet to be made).
                var info = stat()
                let present = lstat(candidate, &info) == 0
                if present, info.st_mode & S_IFMT == S_IFLNK {
                    state.watched[key] = nil
                    return false
                }
                let mask = child != nil || interest == .entries ? Self.entriesMask : Self.contentMask
                let wd = present ? inotify_add_watch(state.descriptor, candidate, mask) : -1
                if !present { errno = ENOENT }
                if wd >= 0 {
                    if let child, lstat(child, &info) == 0 { break }  // it appeared meanwhile: again
                    state.watched[key] = Watched(descriptor: wd, onAncestor: child != nil, placedAt: state.stamp)
                    return true
                }
                guard errno == ENOENT || errno == ENOTDIR, candidate != "/",
                    let slash = candidate.utf8.lastIndex(of: UInt8(ascii: "/"))
                else {
                    state.watched[key] = nil
                    return false
                }
                child = candidate
                candidate = slash == candidate.utf8.startIndex ? "/" : String(candidate[..<slash])
            }
        }
        state.watched[key] = nil
        return false
    }
}
