/*
 * MCP over JSON-RPC: the handshake, method dispatch, batches (for protocol revisions that
 * allow them) and the routing of tool calls to the engine. Runs on the reader thread.
 */
#ifndef SANDBOX_MCP_H
#define SANDBOX_MCP_H

#include <stddef.h>

#include "../base/config.h"
#include "../engine/engine.h"
#include "reader.h"
#include "rpc.h"

struct mcp;

/* Caller frees with mcp_free. The engine is borrowed. */
struct mcp *mcp_new(const struct config *cfg, struct engine *eng);
void mcp_free(struct mcp *m);

/* Handles one input line (without its newline). */
void mcp_handle_line(struct mcp *m, const char *line, size_t len);

/* Answers a line that was longer than --max-message. */
void mcp_line_too_long(struct mcp *m);

/* Handles every whole line the reader holds (after reader_fill): READER_EOF once the input
 * ended, else READER_NEED_MORE. */
enum reader_got mcp_handle_input(struct mcp *m, struct reader *rd);

#endif
