(function () {
	"use strict";
	// The page's body is replaced by each event of its stream, so what
	// the page holds stays the size of one reading, however long it is
	// left open. Without EventSource, the page stays as loaded.
	var live = document.getElementById("live");
	var status = document.getElementById("status");
	var query = document.body.getAttribute("data-live");
	if (!window.EventSource || !live || !query) {
		return;
	}
	var updates = 0;
	var events = new EventSource(query);
	events.onmessage = function (e) {
		live.innerHTML = e.data;
		updates++;
		document.body.setAttribute("data-updates", String(updates));
		status.textContent = "live";
		status.className = "status on";
	};
	events.onerror = function () {
		status.textContent = "reconnecting";
		status.className = "status off";
	};
})();
