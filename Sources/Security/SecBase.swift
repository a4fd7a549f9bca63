import Foundation
import KeychainCore

/// Apple's English text for a status code (the same table every front end uses).
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    let text: String
    if (100_000...100_255).contains(status), let c = strerror(status - 100_000) {
        text = "UNIX[\(String(cString: c))]"
    } else {
        text = KeychainStatus(status).message
    }
    return text as NSString
}
