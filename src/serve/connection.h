// Which socket a request came on, and whether its client has gone. cpp-httplib 0.11 (Debian 12)
// gives a handler no access to its connection, so a request's socket is found by its addresses:
// the descriptor whose peer is the request's remote address and port. Decoders poll it at every
// step to stop work nobody will read.
#pragma once

#include <httplib.h>

namespace dllmq::serve {

// The connected socket of `req`, or -1 when none matches.
int request_socket(const httplib::Request& req);

// Whether the peer of `fd` closed its side (or the connection failed). Never blocks; data the
// client sent after its request (a pipelined request) is left unread.
bool peer_closed(int fd);

}  // namespace dllmq::serve
