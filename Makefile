# sandbox-mcp: plain GNU make with pkg-config.
#   make                         build build/sandbox-mcp (the agent and schemas embedded)
#   make test                    build, then run the whole test suite (tests/run)
#   make SANITIZE=address,undefined test    the same with sanitizers
#   make install PREFIX=/usr/local DESTDIR=
CC ?= cc
PKG_CONFIG ?= pkg-config
PREFIX ?= /usr/local
BUILD ?= build
CFLAGS ?= -O2 -g
WARN := -std=c11 -Wall -Wextra -Wshadow -Wformat=2 -Wvla -Wmissing-prototypes -Wstrict-prototypes
ifneq ($(CI)$(WERROR),)
WARN += -Werror
endif
PKGS := jansson libseccomp libcurl
DEP_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
DEP_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null || echo -ljansson -lseccomp -lcurl)
ifneq ($(SANITIZE),)
SAN := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif
ALL_CFLAGS := $(WARN) -D_GNU_SOURCE $(DEP_CFLAGS) $(SAN) $(CFLAGS) -MMD -MP
LDLIBS := $(DEP_LIBS) -lpthread -lm

SRCS := $(wildcard src/*.c) backends/backend.c $(wildcard backends/*/*.c)
OBJS := $(patsubst %.c,$(BUILD)/%.o,$(SRCS)) $(BUILD)/embed.o $(BUILD)/embed_table.o
SCHEMAS := $(sort $(wildcard schemas/*.json))
AGENT := $(BUILD)/sandbox-agent
BIN := $(BUILD)/sandbox-mcp
# Remember the build flavour so that switching SANITIZE rebuilds everything.
FLAVOUR := $(BUILD)/.flavour-$(subst $(comma),_,$(SANITIZE))
comma := ,

.PHONY: all test check install install-apparmor uninstall clean demo
all: $(BIN)

$(BIN): $(OBJS)
	$(CC) $(SAN) $(LDFLAGS) -o $@ $(OBJS) $(LDLIBS)

$(BUILD)/%.o: %.c $(FLAVOUR)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(FLAVOUR):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/.flavour-*
	@touch $@

# The in-sandbox agent: static, libc only, never instrumented.
$(AGENT): agent/sandbox-agent.c agent/proto.h
	@mkdir -p $(BUILD)
	$(CC) $(WARN) -D_GNU_SOURCE -Os -static -s -o $@ agent/sandbox-agent.c

$(BUILD)/embed.S: $(SCHEMAS) Makefile
	@mkdir -p $(BUILD)
	@{ printf '\t.section .rodata\n\t.balign 16\n\t.globl agent_blob_start, agent_blob_end\n'; \
	   printf 'agent_blob_start:\n\t.incbin "%s"\nagent_blob_end:\n' "$(abspath $(AGENT))"; \
	   i=0; for f in $(SCHEMAS); do \
	     printf '\t.balign 16\nemb_%d_start:\n\t.incbin "%s"\nemb_%d_end:\n' $$i "$(CURDIR)/$$f" $$i; \
	     printf '\t.globl emb_%d_start, emb_%d_end\n' $$i $$i; i=$$((i+1)); done; \
	   printf '\t.section .note.GNU-stack,"",@progbits\n'; } > $@

$(BUILD)/embed.o: $(BUILD)/embed.S $(AGENT) $(SCHEMAS)
	$(CC) -c -o $@ $<

$(BUILD)/embed_table.c: $(SCHEMAS) Makefile
	@mkdir -p $(BUILD)
	@{ echo '#include <stddef.h>'; \
	   echo 'struct embedded { const char *name; const unsigned char *start, *end; };'; \
	   i=0; for f in $(SCHEMAS); do echo "extern const unsigned char emb_$${i}_start[], emb_$${i}_end[];"; i=$$((i+1)); done; \
	   echo 'extern const struct embedded embedded_files[];'; \
	   echo 'const struct embedded embedded_files[] = {'; \
	   i=0; for f in $(SCHEMAS); do echo "  {\"$$f\", emb_$${i}_start, emb_$${i}_end},"; i=$$((i+1)); done; \
	   echo '  {NULL, NULL, NULL}};'; } > $@

$(BUILD)/embed_table.o: $(BUILD)/embed_table.c
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

test check: $(BIN)
	tests/run

demo: $(BIN)
	python3 examples/demo.py $(BIN)

install: $(BIN)
	install -D -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/sandbox-mcp

# For hosts whose AppArmor restricts unprivileged user namespaces (Ubuntu 24.04 and later).
install-apparmor: install
	sed 's#@BIN@#$(PREFIX)/bin/sandbox-mcp#' backends/local/apparmor.profile > $(DESTDIR)/etc/apparmor.d/sandbox-mcp
	apparmor_parser -r $(DESTDIR)/etc/apparmor.d/sandbox-mcp

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/sandbox-mcp

clean:
	rm -rf $(BUILD)

-include $(OBJS:.o=.d)
