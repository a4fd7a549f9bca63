@testable import KeychainDaemon
import Testing

/// The Secret Service's table, the one gate every D-Bus call passes before a handler runs.
@Suite("Secret Service API table")
struct SecretServiceAPITests {
    @Test("objects are told apart by their paths; aliases are collections, their children items")
    func kinds() {
        #expect(SecretServiceAPI.kind(of: "/org/freedesktop/secrets") == .service)
        #expect(SecretServiceAPI.kind(of: "/org/freedesktop/secrets/collection/login") == .collection)
        #expect(SecretServiceAPI.kind(of: "/org/freedesktop/secrets/aliases/default") == .collection)
        #expect(SecretServiceAPI.kind(of: "/org/freedesktop/secrets/aliases/default/i1") == .item)
        #expect(SecretServiceAPI.kind(of: "/org/freedesktop/secrets/collection/login/i1") == .item)
        #expect(SecretServiceAPI.kind(of: "/org/freedesktop/secrets/session/s1") == .session)
        #expect(SecretServiceAPI.kind(of: "/org/freedesktop/secrets/prompt/p1") == .prompt)
        #expect(SecretServiceAPI.kind(of: "/org/freedesktop/secrets/collection/") == nil)
        #expect(SecretServiceAPI.kind(of: "/org/freedesktop/portal/desktop") == nil)
    }

    @Test("a call reaches a method only with the method's signature, on an interface the object has",
          arguments: [
              // (kind, interface, member, signature, expected error name or nil)
              (SecretServiceAPI.ObjectKind.service, "org.freedesktop.Secret.Service" as String?, "SearchItems", "a{ss}", nil as String?),
              (.service, "org.freedesktop.Secret.Service", "SearchItems", "s", "org.freedesktop.DBus.Error.InvalidArgs"),
              (.service, "org.freedesktop.Secret.Service", "GetSecrets", "aoo", nil),
              (.service, nil, "ReadAlias", "s", nil),
              (.service, "org.freedesktop.Secret.Collection", "Delete", "", "org.freedesktop.DBus.Error.UnknownMethod"),
              (.service, "org.freedesktop.Secret.Service", "NoSuchMethod", "", "org.freedesktop.DBus.Error.UnknownMethod"),
              (.collection, "org.freedesktop.Secret.Collection", "CreateItem", "a{sv}(oayays)b", nil),
              (.collection, "org.freedesktop.Secret.Collection", "CreateItem", "a{sv}(oayays)", "org.freedesktop.DBus.Error.InvalidArgs"),
              (.item, "org.freedesktop.Secret.Item", "SetSecret", "(oayays)", nil),
              (.item, "org.freedesktop.DBus.Properties", "Set", "ssv", nil),
              (.item, "org.freedesktop.DBus.Properties", "Get", "s", "org.freedesktop.DBus.Error.InvalidArgs"),
              (.prompt, "org.freedesktop.Secret.Prompt", "Prompt", "s", nil),
              (.session, nil, "Close", "", nil),
              (.session, nil, "Introspect", "", nil),
          ])
    func calls(kind: SecretServiceAPI.ObjectKind, interface: String?, member: String, signature: String,
               error: String?) {
        do {
            let (reached, method) = try SecretServiceAPI.method(member, interface: interface, signature: signature, on: kind)
            #expect(error == nil, "reached \(reached).\(method.name)")
            #expect(method.name == member && method.signature == signature)
        } catch let failure as SecretServiceServer.Failure {
            #expect(failure.name == error, "\(failure.message)")
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test("Introspect shows every method with its arguments, every property with its access, every signal")
    func introspection() {
        let xml = SecretServiceAPI.introspection(of: .collection)
        #expect(xml.contains("<interface name=\"org.freedesktop.Secret.Collection\">"))
        #expect(xml.contains("<method name=\"CreateItem\">\n      <arg name=\"properties\" type=\"a{sv}\" direction=\"in\"/>\n"
                             + "      <arg name=\"secret\" type=\"(oayays)\" direction=\"in\"/>\n"
                             + "      <arg name=\"replace\" type=\"b\" direction=\"in\"/>\n"
                             + "      <arg name=\"item\" type=\"o\" direction=\"out\"/>\n"))
        #expect(xml.contains("<property name=\"Label\" type=\"s\" access=\"readwrite\"/>"))
        #expect(xml.contains("<signal name=\"ItemCreated\">"))
        #expect(xml.contains("<interface name=\"org.freedesktop.DBus.Properties\">"))
        #expect(SecretServiceServer.introspection(for: "/org/freedesktop/secrets").contains("<node name=\"collection\"/>"))
    }
}
