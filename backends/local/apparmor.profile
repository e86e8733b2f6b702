# AppArmor profile for hosts that restrict unprivileged user namespaces
# (kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 24.04 and later). It grants the
# right to create user namespaces to the sandbox-mcp binary alone and confines nothing else.
# Installed by `make install-apparmor` (which puts the binary's path in place of @BIN@).
abi <abi/4.0>,
include <tunables/global>

profile sandbox-mcp @BIN@ flags=(unconfined) {
  userns,

  include if exists <local/sandbox-mcp>
}
