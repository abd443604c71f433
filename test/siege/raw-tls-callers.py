# Callers Node's TLS client cannot be: it sets no receive buffer and batches small writes into one
# record. Run by test/siege/webhook-pieces.test.ts; prints one JSON line.
#
#   unread PORT CA_FILE SERVER_NAME BODY_FILE CONNS SOURCES HOLD_S
#     CONNS connections from 127.2.0.1 and up (SOURCES addresses), each with a 2 KiB receive buffer set
#     before connecting, POST the body and read nothing for HOLD_S seconds: the kernel takes little of
#     the answer, the rest waits in the webhook. Then each is read: closed by the webhook (EOF or reset)
#     or still open.
#   records PORT CA_FILE SERVER_NAME BODY_FILE
#     One POST with Content-Length, each body byte in a TLS record of its own; prints the status line.
import json, socket, ssl, sys, threading, time


def context(ca_file):
    ctx = ssl.create_default_context(cafile=ca_file)
    return ctx


def unread(port, ca_file, name, body_file, conns, sources, hold):
    body = open(body_file, 'rb').read()
    ctx = context(ca_file)
    held, lock, failed = [], threading.Lock(), [0]

    def one(i):
        try:
            raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
            raw.bind(('127.2.0.%d' % (1 + i % sources), 0))
            raw.connect(('127.0.0.1', port))
            s = ctx.wrap_socket(raw, server_hostname=name)
            s.sendall(b'POST /mutate HTTP/1.1\r\nHost: w\r\nContent-Type: application/json\r\n'
                      b'Content-Length: %d\r\n\r\n' % len(body) + body)
            with lock:
                held.append(s)
        except Exception:
            with lock:
                failed[0] += 1

    threads = [threading.Thread(target=one, args=(i,)) for i in range(conns)]
    for t in threads:
        t.start()
        time.sleep(0.005)
    for t in threads:
        t.join()
    time.sleep(hold)
    closed = 0
    for s in held:
        s.settimeout(0.5)
        try:
            while True:
                if not s.recv(65536):
                    closed += 1
                    break
        except (ConnectionError, ssl.SSLError):
            closed += 1
        except (socket.timeout, OSError):
            pass
        s.close()
    print(json.dumps({'sent': len(held), 'failed': failed[0], 'closed': closed}), flush=True)


def records(port, ca_file, name, body_file):
    body = open(body_file, 'rb').read()
    raw = socket.create_connection(('127.0.0.1', port))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s = context(ca_file).wrap_socket(raw, server_hostname=name)
    s.sendall(b'POST /mutate HTTP/1.1\r\nHost: w\r\nContent-Type: application/json\r\nConnection: close\r\n'
              b'Content-Length: %d\r\n\r\n' % len(body))
    sent = 0
    try:
        for i in range(len(body)):
            s.send(body[i:i + 1])
            sent += 1
    except (ConnectionError, ssl.SSLError):
        pass
    s.settimeout(15)
    answer = b''
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            answer += d
    except (ConnectionError, ssl.SSLError, socket.timeout):
        pass
    head, _, rest = answer.partition(b'\r\n\r\n')
    print(json.dumps({'sent': sent, 'status': head.split(b'\r\n')[0].decode(), 'body': rest[:400].decode(errors='replace')}), flush=True)


if __name__ == '__main__':
    mode, port, ca_file, name, body_file = sys.argv[1:6]
    if mode == 'unread':
        unread(int(port), ca_file, name, body_file, int(sys.argv[6]), int(sys.argv[7]), float(sys.argv[8]))
    else:
        records(int(port), ca_file, name, body_file)
