package h1

// testPollers: epoll, the default here, and the portable poller, which Linux builds too.
var testPollers = []testPoller{
	{name: "epoll", newPoll: withEpoll(nil), idleHeap: 400, idleStack: 256},
	portable,
	portableByDeadline,
}
