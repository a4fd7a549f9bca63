import CKeychainLinux
import Foundation
import KeychainClient
import KeychainCore
import KeychainDBus
import KeychainInterface
import KeychainStorage
import KeychainWire
import Logging
import Synchronization
import KeychainThreads

#if canImport(Glibc)
import Glibc
#endif

/// Locking for sleep: keychains set to lock on sleep lock before the machine sleeps (logind's PrepareForSleep under a
/// delay inhibitor) or, without logind, when it wakes (``LockScheduler``, which also locks idle keychains on time).
extension KeychainDaemonServer {
    /// Locks the keychains set to lock on sleep (`security set-keychain-settings -l`).
    func lockForSleep() {
        for file in keychains.all where file.lockForSleep() {
            publish(KeychainEvent(kind: .lock, keychain: file.url.standardizedFileURL.path, pid: getpid()))
        }
    }

    /// Follows logind's PrepareForSleep on the system bus, so that keychains set to lock on sleep lock *before* the
    /// machine sleeps and their keys are not in memory while it is suspended (the wake-up detector of run() stays
    /// for machines without logind). Only the signal from the owner of org.freedesktop.login1 counts (only logind
    /// may own that name on the system bus): any program can send a signal of that name to us.
    ///
    /// keychaind holds a *delay* inhibitor lock meanwhile (logind's Inhibit, when the connection passes file
    /// descriptors): logind then waits for it (at most its InhibitDelayMaxSec, 5 s by default) before suspending, so
    /// the locking is not raced by a fast suspend. Released once the keychains are locked, taken again on waking and
    /// whenever logind (re)starts.
    public func watchForSleep(on systemBus: DBusConnection) throws {
        let logind = "org.freedesktop.login1"
        @Sendable func owner() -> String? {
            let reply = try? systemBus.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                                        interface: "org.freedesktop.DBus", member: "GetNameOwner",
                                                        body: [.string(logind)]))
            return reply?.kind == .methodReturn ? reply?.body.first?.stringValue : nil
        }
        let known = Mutex(owner())
        _ = try systemBus.call(.methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "AddMatch", body: [.string("type='signal',sender='\(logind)',path='/org/freedesktop/login1',"
                                                + "interface='org.freedesktop.login1.Manager',member='PrepareForSleep'")]))
        // logind starting later, or restarting: its inhibitor locks went with it, so a new one is taken.
        _ = try systemBus.call(.methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "AddMatch", body: [.string("type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',"
                                                + "arg0='\(logind)'")]))
        systemBus.startReceiving { [self] message in
            if message.kind == .signal, message.member == "NameOwnerChanged", message.sender == "org.freedesktop.DBus",
               message.body.count == 3, message.body[0].stringValue == logind, let newOwner = message.body[2].stringValue {
                known.withLock { $0 = newOwner.isEmpty ? nil : newOwner }
                if newOwner.isEmpty {
                    sleepInhibitor.withLock { $0.lock.take() }?.close()
                } else {
                    takeSleepInhibitor(on: systemBus)
                }
                return
            }
            guard message.kind == .signal, message.member == "PrepareForSleep", message.path == "/org/freedesktop/login1",
                  message.interface == "org.freedesktop.login1.Manager", case .boolean(let sleeping)? = message.body.first,
                  let sender = message.sender
            else { return }
            // logind restarted: its new unique name is looked up once more.
            if known.withLock({ $0 }) != sender { known.withLock { $0 = owner() } }
            guard known.withLock({ $0 }) == sender else { return }
            sleepInhibitor.withLock { $0.sleeping = sleeping }
            if sleeping {
                lockForSleep()
                sleepInhibitor.withLock { $0.lock.take() }?.close()  // locked: logind may go on
            } else {
                takeSleepInhibitor(on: systemBus)
            }
        }
        takeSleepInhibitor(on: systemBus)
    }


    /// Asks logind for a delay inhibitor on sleep, on a thread of its own: a slow or absent logind never holds up
    /// keychaind's start or the signals behind it. Refused (no logind, a policy that says no, a bus that passes no
    /// descriptors): the signal alone still locks, only without the guarantee of going first.
    func takeSleepInhibitor(on systemBus: DBusConnection) {
        guard systemBus.passesFileDescriptors else { return }
        _ = DetachedThread.start(name: "keychaind-inhibit") { [self] in
            let lock: UnixFileDescriptor
            do {
                let reply = try systemBus.call(.methodCall(
                    destination: "org.freedesktop.login1", path: "/org/freedesktop/login1",
                    interface: "org.freedesktop.login1.Manager", member: "Inhibit",
                    body: [.string("sleep"), .string("keychaind"), .string("Locking keychains set to lock on sleep"),
                           .string("delay")]))
                guard let value = reply.body.first, let answered = reply.fileDescriptor(value) else {
                    logger.warning("logind's Inhibit answered no descriptor")
                    return
                }
                lock = answered
            } catch {
                logger.warning("no sleep inhibitor from logind: \(error)")
                return
            }
            let released = sleepInhibitor.withLock { state -> UnixFileDescriptor? in
                if state.sleeping { return lock }  // too late for this sleep: the next waking asks again
                defer { state.lock = lock }
                return state.lock
            }
            released?.close()
        }
    }
}
