# sandbox-mcp: plain GNU make with pkg-config.
#   make                         build build/sandbox-mcp (the agent and schemas embedded)
#   make test                    build, then run the whole test suite (tests/run)
#   make SANITIZE=address,undefined test    the same with sanitizers
#   make install PREFIX=/usr/local DESTDIR=     the binary and its man page
#   make HARDEN=0                without the hardening flags (see below)
# Changing CC, CPPFLAGS, CFLAGS, LDFLAGS, SANITIZE, HARDEN or WERROR rebuilds everything.
CC ?= cc
PKG_CONFIG ?= pkg-config
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
BUILD ?= build
CFLAGS ?= -O2 -g
WARN := -std=c11 -Wall -Wextra -Wshadow -Wformat=2 -Wvla -Wmissing-prototypes -Wstrict-prototypes
ifneq ($(CI)$(WERROR),)
WARN += -Werror
endif
# libcurl is compiled against, not linked: backends/http/libcurl.c loads it when HTTP is first
# needed.
PKGS := jansson libseccomp libcurl libbsd
LINKED := jansson libseccomp libbsd
DEP_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
DEP_LIBS := $(shell $(PKG_CONFIG) --libs $(LINKED) 2>/dev/null || echo -ljansson -lseccomp -lbsd)
ifneq ($(SANITIZE),)
SAN := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif
# The fuzz build (make fuzz): every object instrumented for libFuzzer's coverage.
ifneq ($(FUZZ),)
SAN += -fsanitize=fuzzer-no-link
endif

# Hardening, on unless HARDEN=0 (or empty): a stack protector, a position-independent
# executable (so ASLR moves the code too), full RELRO (relocations made read-only and every
# symbol bound at start-up) and _FORTIFY_SOURCE=3 (bounds-checked string and memory calls).
# Fortify only works when optimising, so it is left out when the last -O of CFLAGS is -O0 or
# there is none. Sanitizer builds go without it, whatever HARDEN says (a distribution's
# default is undone too): the sanitizers do not support it, as its checked wrappers hide
# accesses from them. A _FORTIFY_SOURCE given in CPPFLAGS or CFLAGS is left as given.
# The static in-sandbox agent gets the same: a static PIE, full RELRO, stack protector and
# fortify (it is always built with -Os).
HARDEN ?= 1
FORTIFY := -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=3
ifneq ($(findstring _FORTIFY_SOURCE,$(CPPFLAGS) $(CFLAGS)),)
FORTIFY :=
endif
ifneq ($(filter-out 0,$(HARDEN)),)
HARDEN_CFLAGS := -fstack-protector-strong -fPIE
HARDEN_LDFLAGS := -pie -Wl,-z,relro,-z,now
AGENT_HARDEN := -fstack-protector-strong -fPIE $(FORTIFY)
AGENT_LINK := -static-pie -Wl,-z,relro,-z,now
ifeq ($(SANITIZE),)
ifneq ($(filter-out -O0,$(lastword $(filter -O%,$(CFLAGS)))),)
HARDEN_CFLAGS += $(FORTIFY)
endif
endif
else
AGENT_LINK := -static
endif
ifneq ($(SANITIZE),)
SAN_CFLAGS := $(SAN) $(if $(FORTIFY),-U_FORTIFY_SOURCE)
endif

ALL_CFLAGS := $(WARN) -D_GNU_SOURCE $(DEP_CFLAGS) $(HARDEN_CFLAGS) $(SAN_CFLAGS) $(CPPFLAGS) $(CFLAGS) -MMD -MP
ALL_LDFLAGS := $(HARDEN_LDFLAGS) $(SAN) $(CFLAGS) $(LDFLAGS)
LDLIBS := $(DEP_LIBS) -lpthread -lm
# The agent: static, libc only, never instrumented; stripped when linked.
AGENT_CFLAGS := $(WARN) -D_GNU_SOURCE -Os $(AGENT_HARDEN) -MMD -MP
AGENT_LDFLAGS := $(AGENT_LINK) -s

SRCS := $(wildcard src/*.c src/*/*.c backends/*.c backends/*/*.c)
OBJS := $(patsubst %.c,$(BUILD)/%.o,$(SRCS)) $(BUILD)/embed.o $(BUILD)/embed_table.o
# Files compiled into the binary, found by name at run time (src/base/embed.h): the tools' schemas,
# and the in-sandbox programs in Python (the agent's prestarted interpreter, the Daytona runner).
# Made ones are named without their $(BUILD)/: the Daytona runner travels in the command of every
# request, so it goes in compressed (sweep.py and runner.py as one program, gzip, which Python's
# zlib reads), and its workspace sync (wssync.py) apart, in the requests that use it alone.
DT_RUNNER_GZ := $(BUILD)/backends/daytona/runner.py.gz
DT_WSSYNC_GZ := $(BUILD)/backends/daytona/wssync.py.gz
EMBEDDED := $(sort $(wildcard schemas/*.json) $(wildcard agent/*.py)) $(DT_RUNNER_GZ) $(DT_WSSYNC_GZ)
AGENT_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(wildcard agent/*.c))
AGENT := $(BUILD)/sandbox-agent
BIN := $(BUILD)/sandbox-mcp
# The unit tests' helper: the server's objects but its main, and tests/helper's commands.
HELPER := $(BUILD)/test-helper
HELPER_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/helper/*.c)) $(filter-out $(BUILD)/src/main.o,$(OBJS))
# The libFuzzer target over the message path (tests/fuzz), built by `make fuzz` alone.
FUZZER := $(BUILD)/fuzz-message
FUZZER_OBJS := $(BUILD)/tests/fuzz/fuzz-message.o $(filter-out $(BUILD)/src/main.o,$(OBJS))
FUZZ_BUILD := build/fuzz
FUZZ_SECONDS ?= 60
# FUZZ_RUNS: stop after that many inputs (the first of it and FUZZ_SECONDS to come ends the run).
FUZZ_RUNS ?=
FUZZ_MAX_LEN ?= 4096
MAN := doc/sandbox-mcp.1
APPARMOR := $(DESTDIR)/etc/apparmor.d/sandbox-mcp

# Everything that shapes what the compiler and the linker make, and a stamp named by its
# checksum: every object depends on the stamp, so a change of compiler or flags between two
# runs makes a new stamp and rebuilds everything (and `make WERROR=1` after `make` really
# checks for warnings). The stamp holds the flags, for reading.
shq = '$(subst ','\'',$(1))'
FLAGS_TEXT := CC=$(CC) | $(ALL_CFLAGS) | $(ALL_LDFLAGS) $(LDLIBS) | agent: $(AGENT_CFLAGS) $(AGENT_LDFLAGS)
FLAGS_SUM := $(firstword $(shell printf '%s' $(call shq,$(FLAGS_TEXT)) | cksum))
STAMP := $(BUILD)/.flags-$(FLAGS_SUM)

.PHONY: all test check install install-apparmor uninstall clean demo fuzz soak valgrind proof-build bench image
all: $(BIN) $(HELPER)

$(BIN): $(OBJS)
	$(CC) $(ALL_LDFLAGS) -o $@ $(OBJS) $(LDLIBS)

$(HELPER): $(HELPER_OBJS)
	$(CC) $(ALL_LDFLAGS) -o $@ $(HELPER_OBJS) $(LDLIBS)

$(BUILD)/%.o: %.c $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/.flags-* $(BUILD)/.flavour-*
	@printf '%s\n' $(call shq,$(FLAGS_TEXT)) > $@

# Compiled apart from its link so that the object's calls (__stack_chk_fail, __*_chk) show
# what the hardening did: the linked agent is stripped.
$(AGENT_OBJS): $(BUILD)/agent/%.o: agent/%.c $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(AGENT_CFLAGS) -c -o $@ $<

$(AGENT): $(AGENT_OBJS)
	$(CC) $(AGENT_LDFLAGS) -o $@ $(AGENT_OBJS)

$(DT_RUNNER_GZ): backends/daytona/sweep.py backends/daytona/runner.py
	@mkdir -p $(dir $@)
	cat $^ | gzip -9n > $@

$(DT_WSSYNC_GZ): backends/daytona/wssync.py
	@mkdir -p $(dir $@)
	gzip -9n < $< > $@

$(BUILD)/embed.S: $(EMBEDDED) Makefile
	@mkdir -p $(BUILD)
	@{ printf '\t.section .rodata\n\t.balign 16\n\t.globl agent_blob_start, agent_blob_end\n'; \
	   printf 'agent_blob_start:\n\t.incbin "%s"\nagent_blob_end:\n' "$(abspath $(AGENT))"; \
	   i=0; for f in $(abspath $(EMBEDDED)); do \
	     printf '\t.balign 16\nemb_%d_start:\n\t.incbin "%s"\nemb_%d_end:\n' $$i "$$f" $$i; \
	     printf '\t.globl emb_%d_start, emb_%d_end\n' $$i $$i; i=$$((i+1)); done; \
	   printf '\t.section .note.GNU-stack,"",@progbits\n'; } > $@

$(BUILD)/embed.o: $(BUILD)/embed.S $(AGENT) $(EMBEDDED) $(STAMP)
	$(CC) -c -o $@ $<

$(BUILD)/embed_table.c: $(EMBEDDED) Makefile
	@mkdir -p $(BUILD)
	@{ echo '#include <stddef.h>'; \
	   echo 'struct embedded { const char *name; const unsigned char *start, *end; };'; \
	   i=0; for f in $(EMBEDDED); do echo "extern const unsigned char emb_$${i}_start[], emb_$${i}_end[];"; i=$$((i+1)); done; \
	   echo 'extern const struct embedded embedded_files[];'; \
	   echo 'const struct embedded embedded_files[] = {'; \
	   i=0; for f in $(patsubst $(BUILD)/%,%,$(EMBEDDED)); do echo "  {\"$$f\", emb_$${i}_start, emb_$${i}_end},"; i=$$((i+1)); done; \
	   echo '  {NULL, NULL, NULL}};'; } > $@

$(BUILD)/embed_table.o: $(BUILD)/embed_table.c $(STAMP)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(FUZZER): $(FUZZER_OBJS)
	$(CC) $(ALL_LDFLAGS) -fsanitize=fuzzer -o $@ $(FUZZER_OBJS) $(LDLIBS)

# Fuzzes the message path for FUZZ_SECONDS (default 60; 0: until stopped), with clang,
# libFuzzer, ASan and UBSan, in a build folder of its own, seeded with the protocol
# fixtures. Findings land in build/fuzz/ (crash-*), the corpus in build/fuzz/corpus.
fuzz:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang SANITIZE=address,undefined FUZZ=1 $(FUZZ_BUILD)/fuzz-message
	@mkdir -p $(FUZZ_BUILD)/corpus $(FUZZ_BUILD)/seeds
	@for f in tests/fixtures/protocol/*/input.jsonl; do cp "$$f" "$(FUZZ_BUILD)/seeds/$$(basename $$(dirname $$f))"; done
	cd $(FUZZ_BUILD) && ./fuzz-message -max_len=$(FUZZ_MAX_LEN) -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
	  $(if $(filter-out 0,$(FUZZ_SECONDS)),-max_total_time=$(FUZZ_SECONDS)) $(if $(FUZZ_RUNS),-runs=$(FUZZ_RUNS)) corpus seeds

# The soak and valgrind measure the release build, whatever SANITIZE says: ASan's quarantine
# makes the resident size grow by design, and valgrind cannot run an ASan binary. They build
# one of their own in build/proof (the sanitizer builds are checked by the test suite).
PROOF_BUILD := build/proof
PROOF_BIN := $(PROOF_BUILD)/sandbox-mcp
proof-build:
	@$(MAKE) -s BUILD=$(PROOF_BUILD) SANITIZE= FUZZ= $(PROOF_BIN)

# A soak of SOAK_CALLS mixed calls (default 10000) on one server of the local backend: the
# resident size may grow by less than 1 MiB after the warm-up, the fd count must not change,
# and nothing may be left (tests/lib/soak.py says what it looks for).
SOAK_CALLS ?= 10000
soak: proof-build
	@state=$$(mktemp -d) && SANDBOX_STATE_DIR=$$state SOAK_SANDBOX_UID=61999 python3 tests/lib/soak.py $(SOAK_CALLS) -- \
	  $(PROOF_BIN) --backend local --log-level warning --sandbox-uid 61999; rc=$$?; rm -rf "$$state"; exit $$rc

# valgrind's memcheck on a session of VALGRIND_CALLS mixed calls (default 1000) with the
# VALGRIND_BACKEND backend (local, the default, or docker: DOCKER_HOST or the default socket):
# no error, no definite leak. The session ends at rest (SOAK_END_AT_REST): under valgrind's
# slowdown, a shutdown while a sandbox is made can outlast its bound. On local, valgrind also
# runs the sandbox's first process (a clone of the server) up to its exec of the agent; that
# process falls back to remounts for mount_setattr and to /proc for execveat, which valgrind
# 3.19 lacks. The verdict is the
# server's own ERROR SUMMARY in the log, not --error-exitcode: that would also change the exit
# status of the server's short-lived clones (the namespace probes), whose leak check at _exit
# counts as lost what only the server's other threads pointed to.
VALGRIND_CALLS ?= 1000
VALGRIND_BACKEND ?= local
VALGRIND_LOG ?=
valgrind: proof-build
	@state=$$(mktemp -d) && log="$${VALGRIND_LOG:-$$state-valgrind.log}" && \
	  SANDBOX_STATE_DIR=$$state SOAK_SANDBOX_UID=61998 SOAK_NO_FOOTPRINT=1 SOAK_END_AT_REST=1 python3 tests/lib/soak.py $(VALGRIND_CALLS) -- \
	  valgrind --leak-check=full --errors-for-leak-kinds=definite --child-silent-after-fork=yes --log-file="$$log" \
	  $(PROOF_BIN) --backend $(VALGRIND_BACKEND) --log-level warning --sandbox-uid 61998; rc=$$?; \
	  [ "$$(grep -c 'ERROR SUMMARY' "$$log" 2>/dev/null)" = 1 ] && grep -q 'ERROR SUMMARY: 0 errors' "$$log" || rc=1; \
	  [ $$rc -eq 0 ] || echo "valgrind: $$(grep 'ERROR SUMMARY' "$$log" 2>/dev/null || echo 'no summary') (see $$log)" >&2; \
	  rm -rf "$$state"; [ -n "$(VALGRIND_LOG)" ] || [ $$rc -ne 0 ] || rm -f "$$log"; exit $$rc

test check: $(BIN) $(HELPER)
	tests/run

demo: $(BIN)
	python3 examples/demo.py $(BIN)

# The benchmark (bench/README.md): floors, bwrap, docker exec, this server on each backend here and
# its peers, interleaved, through the official MCP client; medians, p99, ratios, JSON and a chart.
bench: $(BIN)
	SANDBOX_MCP=$(abspath $(BIN)) sh bench/run

install: $(BIN)
	install -d -m 755 "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(MANDIR)/man1"
	install -m 755 $(BIN) "$(DESTDIR)$(BINDIR)/sandbox-mcp"
	install -m 644 $(MAN) "$(DESTDIR)$(MANDIR)/man1/sandbox-mcp.1"

# For hosts whose AppArmor restricts unprivileged user namespaces (Ubuntu 24.04 and later).
# The profile names the installed path (without DESTDIR). It is loaded only when installing
# onto this system (no DESTDIR) and apparmor_parser is there; else the apparmor service loads
# it at boot.
install-apparmor: install
	install -d -m 755 "$(DESTDIR)/etc/apparmor.d"
	sed 's#@BIN@#$(BINDIR)/sandbox-mcp#' backends/local/apparmor.profile > "$(APPARMOR).tmp"
	chmod 644 "$(APPARMOR).tmp"
	mv -f "$(APPARMOR).tmp" "$(APPARMOR)"
	@if [ -n "$(DESTDIR)" ]; then \
	  echo "install-apparmor: DESTDIR is set: the profile is not loaded"; \
	elif command -v apparmor_parser >/dev/null 2>&1; then \
	  echo "apparmor_parser -r $(APPARMOR)"; apparmor_parser -r "$(APPARMOR)"; \
	else \
	  echo "install-apparmor: apparmor_parser not found: the profile is installed but not loaded" >&2; \
	fi

uninstall:
	rm -f "$(DESTDIR)$(BINDIR)/sandbox-mcp" "$(DESTDIR)$(MANDIR)/man1/sandbox-mcp.1"
	@if [ -f "$(APPARMOR)" ]; then \
	  if [ -z "$(DESTDIR)" ] && command -v apparmor_parser >/dev/null 2>&1; then \
	    echo "apparmor_parser -R $(APPARMOR)"; apparmor_parser -R "$(APPARMOR)" || \
	      echo "uninstall: apparmor_parser -R failed (was the profile loaded?)" >&2; \
	  fi; \
	  echo "rm -f $(APPARMOR)"; rm -f "$(APPARMOR)"; \
	fi

# The container image (Dockerfile): `docker run -i --rm -v /var/run/docker.sock:/var/run/docker.sock
# $(IMAGE)` is the MCP server. IMAGE_TARGET=prebuilt packs $(BIN) instead of compiling it.
IMAGE ?= sandbox-mcp:latest
IMAGE_TARGET ?= runtime
image:
	docker build --target $(IMAGE_TARGET) -t $(IMAGE) .

clean:
	rm -rf $(BUILD)

-include $(OBJS:.o=.d) $(AGENT_OBJS:.o=.d) $(HELPER_OBJS:.o=.d) $(FUZZER_OBJS:.o=.d)
