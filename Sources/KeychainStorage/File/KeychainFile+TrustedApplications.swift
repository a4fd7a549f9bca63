import Foundation
import GRDB
import KeychainCore
import Logging

/// Trusted-application lists (macOS's item ACL): which programs use an item without the user's yes. What a list
/// means is decided by ``AccessEvaluator``; here they are made for new items and extended by Always Allow.
extension KeychainFile {
    /// A new item as an add describes it: Apple's rules (group, dates, defaults), the trusted applications it
    /// asks for, and the access model they make (``AccessEvaluator/accessModel(for:applicationAccess:)``).
    func newItem(_ query: ItemQuery, caller: Caller, now: Date) throws(KeychainError) -> Item {
        var item = try ItemRules.newItem(from: query, caller: caller, now: now)
        item.applicationAccess = try applicationAccess(for: query, caller: caller)
        item.accessModel = AccessEvaluator.accessModel(for: query, applicationAccess: item.applicationAccess)
        return item
    }

    /// The list a new item gets: what the add asked for (`kSecAttrAccess`, `-T`, `-A`), else its creator alone.
    func applicationAccess(for query: ItemQuery, caller: Caller) throws(KeychainError) -> ApplicationAccess? {
        switch query.applicationAccess {
        case .anyApplication: return .anyApplication
        case .applications(let paths):
            var list: [TrustedApplication] = []
            for path in paths {
                guard let application = ExecutableDigest.application(at: path) else {
                    throw .param("the trusted application \(path) cannot be read")
                }
                if !list.contains(application) { list.append(application) }
            }
            return .trusted(list)
        case nil:
            return caller.application.map { .trusted([$0]) }
        }
    }

    /// Always Allow: `application` joins the item's trusted applications, so no later process of that program is
    /// asked, even after a restart. The item is sealed again as it is, with the longer list; the user's answer
    /// arrives as this explicit write, never as a side effect of a read.
    public func trust(_ application: TrustedApplication, item id: UUID, grants: AccessGrants = AccessGrants())
        throws(KeychainError)
    {
        applyAutoLock()
        for _ in 0..<Self.optimisticAttempts {
            let found = try read { db in
                try RawRows.item(uuid: id, db: db)
            }
            guard let row = found else { throw .itemNotFound() }
            let (item, _) = try openMeta(row)
            guard case .trusted(let list) = item.applicationAccess, !list.contains(application) else { return }
            var trusted = item
            trusted.applicationAccess = item.applicationAccess?.trusting(application)
            let secret = try openSecret(row, item: item, query: nil, grants: grants)
            let sealed = try seal(trusted, secret: secret, generation: row.generation + 1,
                                  applicationPassword: item.accessControl?.needsApplicationPassword == true
                                      ? applicationPassword(for: id, query: nil, grants: grants) : nil)
            let stored = try write { db, changes -> Bool in
                guard try unchanged([row], db: db) else { return false }
                changes.removed.append(contribution(of: row))
                try replace(rowID: row.rowID, with: sealed, db: db, changes: &changes)
                return true
            }
            if stored {
                configuration.logger.info("item.application.trusted")
                return
            }
        }
        throw KeychainError(.internalComponent, "the item kept changing while it was being trusted; try again")
    }
}
