package webui_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/weirproject/weir/internal/auth"
	"github.com/weirproject/weir/internal/testcluster"
)

// A JobManager with --auth-token-file: the dashboard's own files load, its
// API calls get 401, and it asks for a token; a wrong one is refused and
// asked for again, the right one shows the cluster, and the token never
// goes into the page's address.
func TestDashboardToken(t *testing.T) {
	chrome := findChromium()
	if chrome == "" {
		t.Skip("no chromium binary found; install Debian's chromium to run the browser tests")
	}
	if testing.Short() {
		t.Skip("browser tests are slow")
	}
	const readToken = "dashboard-read-0123456789"
	tokens, err := auth.Parse([]byte("read " + readToken + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	tc := testcluster.Start(t, testcluster.Options{Tokens: tokens, ClientToken: readToken})
	tc.StartTaskManager("tm-1", 1, nil)
	b := newBrowser(t, chrome)
	b.do(chromedp.Navigate("http://" + tc.HTTPAddr + "/#/"))
	b.wait("the token form", `document.querySelector("#token-form input[type=password]") !== null`, 30*time.Second)
	if msg := eval[string](b, `document.querySelector("#token-form").textContent`); msg == "" {
		t.Error("the token form says nothing")
	}
	b.shot("token-form")

	b.do(
		chromedp.SetValue(chromedp.CSS(`#token-form input`), "wrong-token-0123456789"),
		chromedp.Click(chromedp.CSS(`#token-form button`)),
	)
	b.wait("the form again, saying the token was refused",
		`document.querySelector("#token-form")?.textContent.includes("refused")`, 30*time.Second)

	b.do(
		chromedp.SetValue(chromedp.CSS(`#token-form input`), readToken),
		chromedp.Click(chromedp.CSS(`#token-form button`)),
	)
	b.wait("the overview with the TaskManager",
		`document.querySelector("#token-form") === null && document.body.textContent.includes("tm-1")`, 30*time.Second)
	if href := eval[string](b, `location.href`); len(href) == 0 || strings.Contains(href, readToken) {
		t.Errorf("the page's address %q holds the token", href)
	}
}
