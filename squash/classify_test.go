package squash

import "testing"

func TestClassifyLevels(t *testing.T) {
	tests := []struct {
		name, line string
		cls        lineClass
		leveled    bool
	}{
		{"zookeeper info mentioning error", "2015-07-29 17:41:44,747 - INFO  [QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181:FastLeaderElection@774] - error count is 0", clsInfo, true},
		{"zookeeper error", "2015-07-29 19:03:35,413 - ERROR [LearnerHandler-/10.10.34.11:52225:LearnerHandler@562] - Unexpected exception", clsError, true},
		{"bgl fatal", "- 1117869872 2005.06.04 R04-M1-N4-I:J18-U11 2005-06-04-00.24.32.432192 R04-M1-N4-I:J18-U11 RAS APP FATAL ciod: failed to read", clsError, true},
		{"bgl info with error word", "- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.50.675872 R02-M1-N0-C:J12-U11 RAS KERNEL INFO instruction cache parity error corrected", clsInfo, true},
		{"apache bracketed", "[Sun Dec 04 04:47:44 2005] [error] mod_jk child workerEnv in error state 6", clsError, true},
		{"apache notice", "[Sun Dec 04 04:51:08 2005] [notice] jk2_init() Found child 6725 in scoreboard slot 10", clsInfo, true},
		{"logcat letter E", "03-17 16:13:38.811  1702  2395 E WindowManager: isSimPinSecure mSimDatas is null", clsError, true},
		{"logcat letter D", "03-17 16:13:38.811  1702  2395 D WindowManager: printFreezingDisplayLogs", clsDebug, true},
		{"logcat brief", "E/AndroidRuntime( 1234): FATAL EXCEPTION: main", clsError, true},
		{"windows column", "2016-09-28 04:30:30, Info                  CBS    Loaded Servicing Stack", clsInfo, true},
		{"hadoop warn", "2015-10-18 18:05:27,570 WARN [LeaseRenewer:msrabi@msra-sa-41:9000] org.apache.hadoop.ipc.Client: Address change detected.", clsWarn, true},
		{"python logging", "WARNING:root:disk almost full", clsWarn, true},
		{"logfmt", `time=2024-01-01T00:00:00Z level=error msg="dial tcp: refused"`, clsError, true},
		{"json line", `{"ts":1,"level":"warn","msg":"slow"}`, clsWarn, true},
		{"syslog error shape after header", "Dec 10 07:51:15 LabSZ sshd[24324]: error: Received disconnect from 195.154.37.122", clsError, false},
		{"syslog plain with failure word", "Jun 14 15:16:01 combo sshd(pam_unix)[19939]: authentication failure; logname= uid=0", clsPlain, false},
		{"lowercase error in prose", "the error handling code was rewritten", clsPlain, false},
		{"python exception", "ValueError: invalid literal for int() with base 10: 'x'", clsError, false},
		{"rustc error", "error[E0308]: mismatched types", clsError, false},
		{"gcc diagnostic", "main.c:3:5: error: unknown type name 'foo'", clsError, false},
		{"go build diagnostic", "./main.go:12:2: undefined: frobnicate", clsError, false},
		{"grep -n is not a diagnostic", "src/app.py:12:    raise ValueError(msg)", clsPlain, false},
		{"warning", "warning: unused variable: `x`", clsWarn, false},
		{"pytest E line", "E       AssertionError: assert 1 == 2", clsError, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			li := classify(tt.line)
			if li.cls != tt.cls || li.leveled != tt.leveled {
				t.Errorf("classify(%q) = cls %d leveled %v, want cls %d leveled %v", tt.line, li.cls, li.leveled, tt.cls, tt.leveled)
			}
		})
	}
}

func TestClassifyShapes(t *testing.T) {
	tests := []struct {
		line                     string
		frame, summary, failTest bool
	}{
		{"\tat com.acme.Foo.bar(Foo.java:12)", true, false, false},
		{"    at Object.<anonymous> (/app/index.js:10:5)", true, false, false},
		{`  File "/app/x.py", line 3, in <module>`, true, false, false},
		{"\t/home/dev/widget/server.go:142 +0x2c", true, false, false},
		{"goroutine 34 [running]:", true, false, false},
		{"--- FAIL: TestParse (0.00s)", false, false, true},
		{"FAILED tests/test_x.py::test_y - AssertionError", false, false, true},
		{"tests/test_x.py::test_y FAILED                [ 50%]", false, false, true},
		{"test tests::it_works ... FAILED", false, false, true},
		{"=========== 1 failed, 12 passed in 0.31s ===========", false, true, false},
		{"Tests:       1 failed, 5 passed, 6 total", false, true, false},
		{"test result: FAILED. 3 passed; 1 failed; 0 ignored", false, true, false},
		{"BUILD FAILED in 3s", false, true, false},
		{"error: could not compile `widget` (lib) due to 2 previous errors", false, true, false},
		{"1 error generated.", false, true, false},
		{"Found 3 errors in 2 files.", false, true, false},
		{"Jul  1 21:03:00 host WindowServer[184]: pid 445 failed to act on a ping", false, false, false},
		{"2556843 gige5 gige temperature 1072878243 1 warning", false, false, false},
	}
	for _, tt := range tests {
		li := classify(tt.line)
		if li.frame != tt.frame || li.summary != tt.summary || li.failTest != tt.failTest {
			t.Errorf("classify(%q) = frame %v summary %v failTest %v, want %v %v %v",
				tt.line, li.frame, li.summary, li.failTest, tt.frame, tt.summary, tt.failTest)
		}
	}
}

func TestTemplateKey(t *testing.T) {
	same := [][2]string{
		{"081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 for block blk_38865049064139660 terminating",
			"081110 101010 9 INFO dfs.DataNode$PacketResponder: PacketResponder 2 for block blk_1234 terminating"},
		{"req 38101a0b-2096-447d-96ea-a692162415ae done in 12ms", "req 9bc36dd9-91c5-4314-898a-47625eb93b09 done in 7ms"},
		{"Jun 14 15:16:01 combo sshd[1]: x", "Jul  2 01:02:03 combo sshd[22]: x"},
		{"open /home/a/b.txt: no such file", "open /var/x/y/z.go: no such file"},
		{"R02-M1-N0-C:J12-U11 FATAL data TLB error interrupt", "R16-M0-NB-C:J07-U11 FATAL data TLB error interrupt"},
	}
	for _, p := range same {
		if templateKey(p[0]) != templateKey(p[1]) {
			t.Errorf("templates differ:\n%q\n%q", p[0], p[1])
		}
	}
	differ := [][2]string{
		{"icache prefetch depth....................0", "icache prefetch threshold................0"},
		{"fpr29=0xffffffff", "r24=0x0ffea4c8"},
		{"ciod: Error loading /a/b: Permission denied", "ciod: Error loading /a/b: Exec format error"},
	}
	for _, p := range differ {
		if templateKey(p[0]) == templateKey(p[1]) {
			t.Errorf("templates collide:\n%q\n%q", p[0], p[1])
		}
	}
}
