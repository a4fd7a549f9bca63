// `import KeychainClient` gives a program the whole client side: the interface and the remote service
// (KeychainInterface) and the in-process engine (EmbeddedKeychainService, the native API).
@_exported import KeychainInterface
