/work/wt/arch/target-check/release/deps/messages-0ce3bac887438f21.d: nki-core/tests/messages.rs

/work/wt/arch/target-check/release/deps/libmessages-0ce3bac887438f21.rmeta: nki-core/tests/messages.rs

nki-core/tests/messages.rs:
