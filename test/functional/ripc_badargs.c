/*
 * Bad input from the application gets an error code and changes nothing:
 * NULL arrays with non-zero counts, NULL items of non-zero length, too
 * many items or return buffers, zero-length return buffers, service 65535, sending from a service the
 * process does not own, receiving on one it does not own (the next call
 * works), bad windows.  A signal interrupts a blocking receive with
 * RIPC_EINTR and loses nothing; a receive timeout is honoured.
 */
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "common.h"

static int server(void)
{
	uint16_t me = ripc_register_random_service_id();
	struct ft_msg m;
	int n = 0;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	ft_ready(me);
	for (;;) {
		ft_recv_ok(me, &m, 30000);
		if (ft_is_word(&m, "quit"))
			break;
		/* Only the valid messages may arrive. */
		FT_CHECK(ft_is_word(&m, "valid"), "unexpected message");
		n++;
		FT_EXPECT(ft_send_word(me, m.from, "ack"), RIPC_OK);
		ft_msg_free(&m, false);
	}
	ft_msg_free(&m, false);
	FT_CHECK(n == 2, "%d valid messages", n);
	return 0;
}

static void on_alarm(int sig)
{
	(void)sig;
}

static int client(void)
{
	uint16_t srv = (uint16_t)ft.server_id;
	uint16_t me = ripc_register_random_service_id();
	char data[16] = "x";
	void *buf[RIPC_MAX_ITEMS + 1], *nullbuf[1] = { NULL };
	uint32_t len[RIPC_MAX_ITEMS + 1], zero[1] = { 0 };
	void *rbuf[1] = { data };
	struct ft_msg m;
	struct sigaction sa;
	double t0;

	FT_CHECK(me != RIPC_INVALID_SERVICE_ID, "register");
	for (int i = 0; i <= RIPC_MAX_ITEMS; i++)
		buf[i] = data, len[i] = 1;

#define BOTH(call_args, want)                                                \
	do {                                                                 \
		FT_EXPECT(ripc_send_short call_args, want);                  \
		FT_EXPECT(ripc_send_long call_args, want);                   \
	} while (0)

	BOTH((me, srv, NULL, len, 1, NULL, NULL, 0), RIPC_EINVAL);
	BOTH((me, srv, buf, NULL, 1, NULL, NULL, 0), RIPC_EINVAL);
	BOTH((me, srv, nullbuf, len, 1, NULL, NULL, 0), RIPC_EINVAL);
	/* Zero-length items are fine (ripc_zerolen); zero-length return
	 * buffers are not. */
	BOTH((me, srv, buf, len, 1, rbuf, zero, 1), RIPC_EINVAL);
	BOTH((me, srv, buf, len, RIPC_MAX_ITEMS + 1, NULL, NULL, 0),
	     RIPC_ETOOMANY);
	BOTH((me, srv, buf, len, 1, NULL, len, 1), RIPC_EINVAL);
	BOTH((me, srv, buf, len, 1, buf, NULL, 1), RIPC_EINVAL);
	BOTH((me, srv, buf, len, 1, buf, len, RIPC_MAX_RETURN_BUFS + 1),
	     RIPC_ETOOMANY);
	BOTH((me, 65535, buf, len, 1, NULL, NULL, 0), RIPC_EBADID);
	BOTH((65535, srv, buf, len, 1, NULL, NULL, 0), RIPC_EBADID);
	/* A service this process does not hold: the server's own. */
	BOTH((srv, srv, buf, len, 1, NULL, NULL, 0), RIPC_ENOTOWNER);
	FT_EXPECT(ripc_send_long(me, srv, buf, len, 0, NULL, NULL, 0),
		  RIPC_EINVAL);

	/* Receive on a service we do not own, then a valid one works. */
	FT_EXPECT(ripc_receive_timeout(srv, NULL, NULL, NULL, NULL, NULL,
				       NULL, NULL, 0),
		  RIPC_ENOTOWNER);
	FT_EXPECT(ripc_receive_timeout(65535, NULL, NULL, NULL, NULL, NULL,
				       NULL, NULL, 0),
		  RIPC_EBADID);
	FT_EXPECT(ft_send_word(me, srv, "valid"), RIPC_OK);
	ft_recv_ok(me, &m, 10000);
	FT_CHECK(ft_is_word(&m, "ack"), "ack");
	ft_msg_free(&m, false);

	/* Windows and buffers. */
	FT_EXPECT(ripc_reg_recv_window(NULL, 10), RIPC_EINVAL);
	FT_EXPECT(ripc_reg_recv_window(data, 0), RIPC_EINVAL);
	FT_EXPECT(ripc_reg_recv_window_for_service(data, 8, srv),
		  RIPC_ENOTOWNER);
	FT_EXPECT(ripc_reg_recv_window_for_service(data, 8, 65535),
		  RIPC_EBADID);
	FT_EXPECT(ripc_reg_recv_window(data, 8), RIPC_OK);
	FT_EXPECT(ripc_reg_recv_window(data + 4, 8), RIPC_EINVAL); /* overlap */
	FT_EXPECT(ripc_unreg_recv_window(data), RIPC_OK);
	FT_EXPECT(ripc_unreg_recv_window(data), RIPC_ENOTFOUND);
	FT_CHECK(ripc_buf_alloc(0) == NULL, "alloc(0)");
	FT_CHECK(ripc_buf_unregister(data) == 0, "unregister unknown");
	ripc_buf_free(data); /* not ours: ignored */
	ripc_buf_free(NULL);
	FT_EXPECT(ripc_buf_register(NULL, 1), RIPC_EINVAL);
	FT_EXPECT(ripc_buf_register(data, sizeof(data)), RIPC_OK);
	FT_CHECK(ripc_buf_unregister(data) == 1, "unregister");
	FT_CHECK(strcmp(ripc_strerror(250), "Unknown libripc error") == 0,
		 "strerror");

	/* Timeout, then a signal during a blocking receive. */
	t0 = ft_now();
	FT_EXPECT(ripc_receive_timeout(me, NULL, NULL, NULL, NULL, NULL, NULL,
				       NULL, 300),
		  RIPC_ETIMEDOUT);
	FT_CHECK(ft_now() - t0 >= 0.29 && ft_now() - t0 < 1.0,
		 "timeout took %.3f s", ft_now() - t0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL,
		  &(struct itimerval){ .it_value = { 0, 300000 } }, NULL);
	t0 = ft_now();
	FT_EXPECT(ft_recv(me, &m, -1), RIPC_EINTR);
	FT_CHECK(ft_now() - t0 < 5, "interrupt took %.3f s", ft_now() - t0);
	/* Nothing was lost: the next message still arrives. */
	FT_EXPECT(ft_send_word(me, srv, "valid"), RIPC_OK);
	ft_recv_ok(me, &m, 10000);
	FT_CHECK(ft_is_word(&m, "ack"), "ack after EINTR");
	ft_msg_free(&m, false);

	FT_EXPECT(ft_send_word(me, srv, "quit"), RIPC_OK);
	return 0;
}

int main(int argc, char **argv)
{
	ft_init(argc, argv, "ripc_badargs", 1, 0);
	ft_lib_init();
	return ft.server ? server() : client();
}
