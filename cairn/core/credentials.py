"""Credentials as people say them in chat, in any of many languages, beside provider shapes.

:mod:`cairn.core.secrets` knows the shapes providers give their keys. People also say
credentials in words ("la clave del wifi es ...", "jenkins password X", "пароль от вайфая
..."), type them in commands (``sshpass -p X``, ``redis-cli -a X``), assign them in
configuration (``SMTP_PASS=``, ``"api_key": "..."``, ``Cookie: sessionid=...``), list
recovery codes and seed phrases, or space a key out as it was printed. :func:`chat_secrets`
finds those by a few general rules rather than by a list of phrasings:

- a credential word (password, PIN, code, key, token, secret, and their names in some forty
  languages) followed, within a few words, by a value that reads as one (letters and digits
  mixed, symbols, mixed case, long hex; after a connector such as "is" or ":", any word that
  is not a common one): prepositions and the word after them ("for the grafana account")
  and connectors are read past;
- a name that holds a credential word (split at ``_``, ``-``, ``.`` and case changes:
  ``DD_API_KEY``, ``_authToken``, ``PrivateKey``) assigned a value, in any syntax;
- the password flags of common commands;
- what follows "recovery codes", "backup codes", "seed phrase" and the like;
- groups of characters spaced out as a key or card number is printed.

A value that is a placeholder, a reference to where a secret lives, a host, a path, a
version or an identifier named as such is not a credential. This module imports nothing of
Cairn's.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = [
    "chat_secrets",
    "descriptive",
    "literal_alternation",
    "lowered",
    "not_a_value",
    "placeholder",
    "public_spans",
    "said_of_something_else",
    "ui_string",
]

# What a password, PIN or access code is called (lower case), in the languages people write
# in; a word that begins with one of these counts ("parolası", "lösenordet", "sandinya").
_PASSWORD_WORDS = """
    password passwort passwd passwrod pasword passwrd passowrd paswd paswoord psw pwd
    contra šifra sifra lozinka лозинка пасс пін parool parole slaptažodis slaptazodis
    passu tunnari パス พาสเวิร์ด clau hemlighet hemligheten neno-la-siri neno-siri پسورد رمز رمزش
    பாஸ்வேர்ட் கடவுச்சொல் पासवर्ड passw0rd
    passcode passphrase pass pwd pw pword fjalëkalim fjalëkalimi סיסמת 🔑 パスコード باسورد
    kennwort zugangsdaten zugangscode mot-de-passe mdp identifiants contraseña contrasena
    contraseñas clave credenciales senha palavra-passe credenciais wachtwoord ww inlog
    wachtwoorden parola parolă parolası credenziali hasło haslo hasła hasla şifre sifre şifresi
    sifresi lösenord losenord lösenordet adgangskode kodeord passord salasana tunnussana heslo hesla
    jelszó jelszo jelszava geslo lozinka lozinku κωδικός κωδικος συνθηματικό סיסמה סיסמא הסיסמה
    sandi kata-sandi katasandi kata-laluan nenosiri neno-siri pasahitza contrasenya wpa2 wpa
    passfrase passfras passfrasen lösenfras losenfras salasanalause wachtzin memorable-word lösen
    community-string snmp-community comunitatea app-password app-passwort
    memorable-information პაროლი პაროლია გასაღები գաղտնաբառ գաղտնաբառը የይለፍ-ቃል
    wpa-psk psk пароль пароля паролем пароли парола гасло гасла кодове přihlašovací-údaje
    кодовая кодовое кодовое-слово پاس-ورڈ پاسورڈ பாஸ்வேர்டு பாஸ்வேர்ட்
    prihlasovaci-udaje كلمة-المرور كلمة-السر كلمة-سر كلمه-سر كلمةالمرور رمز-عبور رمزعبور گذرواژه
    पासवर्ड पासकोड পাসওয়ার্ড รหัสผ่าน รหัส mật-khẩu matkhau パスワード 密码 密碼 口令 비밀번호 비번 암호
""".split()  # noqa: SIM905 (a word list reads best as prose)
# What a PIN or a numeric code is called: a number after one of these is a credential.
_CODE_WORDS = """
    pin pincode pin-code passcode code-pin otp tan codice kod kodu koden kode koodi código
    combo combination kombination combinación combinaison combinazione combinação szyfr override
    验证码 驗證碼 校验码 动态码 인증번호 인증코드 認証コード 確認コード 门禁密码
    codigo code cid セキュリティコード 安全码 보안코드 security-code código-de-seguridad larmkod
    larmkoden alarmcode alarmkod türcode turcode pinkod pinkoden пин пин-код
    код digicode disarm puk cvv cvc cvv2 cvc2 csc tür-code kód kódja kódot codi کد কোড
    รหัสประตู κωδικός
    קוד कोड पिन 暗証番号 비밀코드 keypad 도어락 msimbo கோட் পিন پن mpin كود codul codului
""".split()  # noqa: SIM905 (a word list reads best as prose)
# What a key, token or secret is called.
_KEY_WORDS = """
    token tokens secret secrets apikey api-key api_key key keys credential credentials creds dsn
    signature sig hmac bearer jwt clé cle schlüssel schluessel chave chiave sleutel klucz
    anahtar nyckel nøgle nokkel avain kulcs ključ ключ токен секрет টোকেন κλειδί מפתח مفتاح
    सीक्रेट キー トークン 密钥 令牌 키 토큰 シークレット 秘钥 秘密鍵 시크릿 비밀키
    license-key licence-key product-key activation-code activation-key lizenzschlüssel
    aktivierungscode clé-de-licence clave-de-licencia código-de-activación chave-de-licença
    codice-di-attivazione codice-di-autorizzazione authorization-code licentiesleutel
    klucz-licencyjny 라이선스 ライセンスキー 激活码 stream-key streamkey
""".split()  # noqa: SIM905 (a word list reads best as prose)
# The digits as words, in the languages a door code is said in ("siete tres nueve uno").
_NUMBER_WORDS = frozenset(
    """
    zero oh one two three four five six seven eight nine cero uno dos tres cuatro cinco seis
    siete ocho nueve um dois três quatro sete oito nove zéro un deux trois quatre cinq sept
    huit neuf null eins zwei drei vier fünf sechs sieben acht neun due tre quattro cinque sei
    sette otto nul een twee drie vijf zes zeven negen jeden dwa trzy cztery pięć sześć
    siedem osiem dziewięć nula jedna dva tři čtyři pět šest sedm osm devět nulla egy kettő
    két három négy öt hat hét nyolc kilenc unu doi trei patru cinci șase şase șapte opt nouă
    нула едно две три четири пет шест седем осем девет нуль один два чотири п'ять шість сім
    вісім дев'ять ноль четыре пять шесть семь восемь девять μηδέν ένα δύο τρία τέσσερα πέντε
    έξι επτά εφτά οκτώ οχτώ εννιά εννέα אפס אחת אחד שתיים שניים שלוש ארבע חמש שש שבע שמונה
    תשע noll en ett två tre fyra fem sex sju åtta nio to fire seks syv otte ni et nolla yksi
    kaksi kolme neljä viisi kuusi seitsemän kahdeksan yhdeksän üks kaks kolm neli viis kuus
    seitse kaheksa üheksa kosong satu dua tiga empat lima enam tujuh lapan delapan sembilan
    isa dalawa tatlo apat anim pito walo siyam sıfır bir iki üç dört beş altı yedi sekiz
    dokuz sifuri moja mbili tatu nne tano sita saba nane tisa ぜろ れい まる いち に さん よん
    し ご ろく なな しち はち きゅう く không một hai ba bốn năm sáu bảy tám chín linh mốt
    صفر واحد اثنان اثنين ثلاثة ثلاث أربعة اربعة خمسة ستة سبعة ثمانية ثمانيه تسعة ek do teen
    char chaar paanch panch chhe chhah saat aath nau shunya
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
# Digits as CJK numerals or Sino-Korean words: 八三五零六二, 일구팔사.
_CJK_DIGITS = re.compile(r"[〇零一二三四五六七八九两]{4,}|[공영일이삼사오육칠팔구]{4,}")
# What a code must open, said just before "code", for the English word to name a credential.
_OPENS = re.compile(
    r"(?i)\b(?:door|gate|alarm|safe|lock|access|entry|security|entrance|building|keypad"
    r"|garage|wi-?fi|wlan|verification|login|unlock|backup|recovery|pin|otp|2fa|mfa|auth"
    r"|one-time|sms|confirmation|vault|padlock|combination|key ?box|lock ?box|digicode|porte"
    r"|server ?room|cage|rack|locker|cabinet|mailbox|voicemail|disarm|arm|master|locks"
    r"|duress|panic|engineer|installer|service|unset"
    # a device's screen lock (round 10)
    r"|i?phone|ipad|tablet|laptop|screen|device|handy|telefono|teléfono|téléphone)\W+(?:\w+\W+)?$"
)
# A word for what a code opens, anywhere before it: "the keypad on the server room door ...
# new code is 4304#".
_OPENS_ANYWHERE = re.compile(
    r"(?i)\b(?:door|doors|gate|alarm|safe|keypad|lock|padlock|locker|server ?room|tür|porte"
    r"|puerta|porta|portão|alarme|alarma|allarme|tresor|coffre|caja fuerte|kluis|deur|drzwi"
    r"|dörr|dør|sejf|lockbox|key ?box|cage|sleutelkast(?:je)?|kluisje|schlüsselkasten|safe box"
    r"|register|registers|kassa|caisse|till|pos|terminal|도어락|서버실|출입문|현관문|mlango"
    # where a one-time code authorises a payment (round 9)
    r"|sms|authenticator|authori[sz]\w*|transfer|payment|betaling|pago|paiement|zahlung|virement"
    r"|bonifico|überweisung|transferencia|bank-?app)\b"
)
# The same, said after "code": "code de la porte", "código de la puerta", "Code für die Tür".
_OPENS_AFTER = re.compile(
    r"(?i)\W+(?:(?:de|du|of|for|to|für|zur|zum|der|des|da|do|della|del|dla|do|van|voor|för"
    r"|til|the|la|le|el|die|l'|o|a)\W+){1,3}(?:porte|portail|puerta|porta|portão|portone"
    r"|cancello|door|gate|tür|tor|deur|drzwi|dörr|dør|alarme|alarma|allarme|alarm|coffre"
    r"|cofre|caja|safe|tresor|kluis|sejf|cadenas|candado|lucchetto|wifi|wi-fi|entrée|entrada"
    r"|ingresso|eingang|ingang|wejścia|bâtiment|edificio|garage|garagem|local|salle|sala"
    r"|armoire|armario|digicode|keypad|lock)"
)
# A Wi-Fi network, whose "code" or "key" is a password of letters as often as of digits.
_WIFI = re.compile(r"(?i)wi-?fi|\bwlan|\bwi fi\b|ssid|wpa|вай-?фай|ไวไฟ|واي ?فاي|와이파이")
# Code words that, like "code", name a credential only with a connector and digits after them
# and something they open: "the server room keypad is 571938#", not "keypad model 4200".
_PLAIN_CODES = frozenset({"code", "codes", "override", "keypad", "도어락", "msimbo"})
# A code read out digit by digit or in groups of two or three.
_READ_OUT = r"(?:\d(?:[ \-–]\d){3,7}|\d{2,3}(?:[ \-–]\d{2,3}){1,3})(?![\w\-–])"
_READ_OUT_CODE = re.compile(_READ_OUT)
# A connector, then digits read out one by one or as words ("ist jetzt 2 4 6 8 1", ": 0 9 0 9 2
# 2", "is one nine nine two"): what a person keying a code in says, and an id or a count is
# not said so; "code" needs nothing it opens before it then (round 10).
_READ_OUT_SAID = re.compile(
    r"(?i)(?:[^.!?\n(]|\([^)\n]{0,40}\)){0,60}?(?:\bis|:|=|\bnow|\bist|\best|\bes|\bé|\bè|\bni|\bje|\bjest|\bc'est"
    r"|\bto|\bjetzt|\bahora|\bteraz|\bmaintenant)\W+(?:\d(?: \d){3,7}(?![\w\-–])|(?:(?:"
    + "|".join(sorted(w for w in _NUMBER_WORDS if w.isalpha() or "'" in w))
    + r")\b[ ,]*){4,8})"
)
# A code's digits: 4 to 8 of them, keyed in (4711#) or read out.
_CODE_DIGITS = rf"(?:\d{{4,8}}[#*]?(?!\w)|{_READ_OUT})"
# A connector, then a code's digits: "is 4711", ": 0 0 4 6 1", "je 2 7 7 4 0 1".
_SAID_TO_BE = re.compile(
    r"^(?:[^.!?\n(]|\([^)\n]{0,40}\))*?(?:\bis|:|=|\bnow|\bist|\best|\bes|\bé|\bè|\bni|\bje|\beste|\ber|\bär|\bon|"
    r"(?:changed|set|reset) to|"
    r"\bjest|\bzijn|\bsono|번호\w?)(?:\W+(?:now|jetzt|maintenant|ahora|adesso|teraz|nu|acum))?\W+"
    + _CODE_DIGITS
)
# Quotes that open a phrase, and what closes each.
_QUOTES = {"«": "»", "„": "“", "“": "”", '"': '"', "'": "'", "‹": "›", "「": "」"}
# Where a one-time code arrives: "the code that came to the on-call phone is 384912".
_SENT_TO = re.compile(
    r"(?i)\b(?:sms|texted|text message|phone|authenticator|2fa|mfa|otp|one-time|totp)\b"
)
# Codes of a card: CVV, CVC.
_CARD_CODES = frozenset({"cvv", "cvc", "cvv2", "cvc2", "csc", "cid"})
# "recovery codes", "seed phrase": every code-like word after one of these is a credential.
_LIST_WORDS = (
    "recovery code", "backup code", "backup-code", "recovery key", "recovery phrase",
    "seed phrase", "seed words", "mnemonic", "wallet seed", "2fa seed", "2fa secret",
    "otp secret", "totp secret", "setup key", "secret phrase", "wiederherstellungscode",
    "codes de récupération", "códigos de recuperación", "códigos de backup", "backup words",
    "recovery words", "frase de recuperação", "frase semente", "palabras de recuperación",
    "ledger seed", "wallet words", "wiederherstellungsschlüssel", "seed:",
    "codici di backup", "codici di recupero", "codes de secours", "codes de sauvegarde",
    "códigos de respaldo", "códigos de recuperação", "kody zapasowe",
    "kody odzyskiwania", "kody awaryjne", "herstelcodes", "back-upcodes", "reservekoder",
    "reservkoder", "gjenopprettingskoder", "backupkoder", "varakoodit", "palautuskoodit",
    "резервные коды", "коды восстановления", "резервні коди", "kurtarma kodları",
    "yedek kodlar", "yedek kodları", "záložní kódy", "obnovovací kódy", "tartalék kódok",
    "helyreállítási kód", "coduri de rezervă", "coduri de recuperare", "εφεδρικοί κωδικοί",
    "קודי גיבוי", "رموز الاسترداد", "رموز احتياطية", "बैकअप कोड", "रिकवरी कोड", "mã dự phòng",
    "mã khôi phục", "kode cadangan", "kode pemulihan", "รหัสสำรอง", "バックアップコード",
    "リカバリーコード", "復旧コード", "リカバリコード", "备用码", "恢复码", "备份码", "備用碼",
    "復原碼", "백업 코드", "복구 코드", "seed-phrase", "seedphrase", "сид-фраза",
    "сид фраза", "seed-фраза", "seed фраза", "мнемоническая фраза", "мнемонічна фраза",
    "frase seed", "frase semilla", "frase de recuperación", "frase mnemónica",
    "phrase de récupération", "phrase mnémonique", "phrase seed", "herstelzin", "seed-zin",
    "wiederherstellungsphrase", "frasa pemulihan", "助记词", "助記詞", "ニーモニック",
    "シードフレーズ", "복구 문구", "시드 문구", "kurtarma ifadesi", "gjenopprettingsfrase",
    "återställningsfras", "palautuslause", "fraza odzyskiwania", "fraza seed",
)  # fmt: skip

# Words that join a credential word to its value ("is", ":") in many languages; the value
# after one of these may be any uncommon word.
_CONNECTORS = frozenset(
    """
    is are was were = : := => -> → — – - now still currently equals changed es
    era será son está sera est était ist lautet lautete wird war é era será ficou è sarà era è:
    is: är var blir er var blev oli jest są była będzie olarak dır dir idi это был была будет є
    був была это: είναι ήταν היא הוא هي هو है था थी là adalah ialah yaitu ni ay ialah ile és
    volt jsou bylo este fost er: er blev は が 是 为 為 는 은 이 가 입니다 です
    it's it’s its that's that’s here's here’s c'est c’est c'était c’était è sono է ነው არის
    改成 改为 换成 改為 變成 就是 번호 번호는
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
# Words read past on the way to the value: articles, pronouns, particles, auxiliaries,
# "the new", "my", "our", "of the admin account" ...
_SKIP = frozenset(
    """
    the a an my our your their his her its this that new old current temporary temp default same
    real actual el la los las un una mi nuestro nuestra tu su le les un une mon ma mes notre
    votre der die das den dem des ein eine einen mein meine unser unsere dein deine o os as um
    uma meu minha nosso nossa il lo gli uno mio mia nostro nostra de het een mijn ons onze mój
    moja nasz nasza nowy nowe yeni benim bizim den det en ett min mitt vår vårt ny nya nytt мой
    моя наш наша новый новая твой ο η το ένας μια μου μας ה ال मेरा मेरी हमारा nya baru saya
    kami các cái của này mới quella quello questa questo also just please pls plz btw fyi ok
    okay oh and und et y e i og och
    ja и і та a также whatever whichever one ones what which that whoever try use now jetzt
    ahora maintenant agora ora nu teraz сейчас теперь şimdi nyt nå most ny nyní acum tani hiện
    sekarang sasa ngayon abhi अब 今 现在 지금
    фраза фразы phrase frase φράση
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
# After one of these, the next word is what the credential is for, not the credential.
_PREPOSITIONS = frozenset(
    """
    for of on in at from under via into onto behind inside through by about de du des pour par
    sur dans chez avec para por con en del al em no na do da dos das für fur von vom zum zur für
    im in am bei mit auf unter voor van naar op bij met di del della dello per su nel nella con
    dla do na w z od przy için için için ile för till på av til fra för для від до к на в с у от
    при από για στο στη σε ל של ב ל- के की का में पर से untuk ke di dari pada kwa ya katika sa
    ng para k na pro u od pre の で に から
        pentru pe din cu dintr
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
# Words before "key" or "token" that make it something other than a credential: "public
# key", "cache key", "input tokens", "sender_key".
# Words that say "is" in the language of one credential word only ("salasana on", "heslo je",
# "hasło to"): elsewhere they are other words.
_OWN_CONNECTORS: dict[str, frozenset[str]] = {
    "ovikoodi": frozenset({"on"}),
    "koodi": frozenset({"on"}),
    "salasana": frozenset({"on"}),
    "parool": frozenset({"on"}),
    "parooli": frozenset({"on"}),
    "salasanani": frozenset({"on"}),
    "heslo": frozenset({"je"}),
    "geslo": frozenset({"je"}),
    "lozinka": frozenset({"je"}),
    "hasło": frozenset({"to"}),
    "haslo": frozenset({"to"}),
    "hasła": frozenset({"to"}),
    "parola": frozenset({"e", "este"}),
    "senha": frozenset({"e"}),
}
# Accounts named before a password ("admin / X", "login root pass X").
_LOGINS = frozenset(
    """
    admin administrator root user users username login ubnt pi sa postgres oracle guest operator
    usuario utilisateur benutzer usuário utente gebruiker użytkownik kullanıcı användare
    пользователь логин логін användarnamn
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
_QUALIFIERS = frozenset(
    """
    public pub cache primary foreign partition sort object idempotency host sender device
    identity gpg pgp gnupg rsa dsa ecdsa eddsa ed25519 curve25519 age ssh-ed25519 fingerprint
    composite unique lookup dict map hash row index max min input output prompt completion dedup
    dedupe registry translation i18n routing-table sorting shard cluster bucket error exit
    status http return response reason result country zip postal area promo discount coupon
    source short qr bar barcode language currency color colour dial iso mcc tax vat swift bic
    branch airport product item sku order spki certificate cert ssl tls hpkp kms foreign-key
    fehler erreur ошибки day boarding season gym ski museum visitor bus
        existing publishable sha sha256 sha1 md5 hashed invalid expired revoked missing
        posta pocztowy pocztowego poštovní postale postal
        verify identité identity style hpkp dkim
        field fields column поле поля колонка столбец feld spalte champ colonne campo colonna
        kolumna sloupec kolom sütun
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
# Words after "code" or "key" that make it something else: "kod pocztowy", "código postal".
_NAMED_AFTER = tuple(
    """
    pocztowy pocztowego postal postale poštovní poštové postais pošte posta irányítószám
    fiscale sdi destinatario ateco cliente fornitore iva البريدي rabatowy rabatu descuento
    promocional promo promoção sconto réduction indirim kedvezmény slevový
    ไปรษณีย์ ไปรษณีย
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
# Words about a credential, not one: where it is, what happened to it, what it must be.
_ABOUT = frozenset(
    """
    vault manager 1password bitwarden lastpass keepass keychain passbolt doppler sops secret
    policy policies rules rule reset resets change changes changed rotate rotated rotation
    rotating expire expired expires expiring expiry expiration length complexity strength
    requirement requirements required requires hint hints prompt prompts field fields form
    protected protection manager spraying leak leaked leaks hash hashes hashed hashing salt
    salted encrypted encryption stored storage saved kept shared sharing sent generated
    generator update updated updating works worked working wrong incorrect invalid valid correct
    missing empty blank unknown known same different weak strong secure insecure here there
    where below above attached pinned sticker whiteboard back drawer envelope safe locker
    channel thread dm message email mail ticket wiki doc docs documentation confluence notion
    page file     config configuration settings setting ui
    console portal dashboard admin login user username account ssh endpoint endpoints header
    headers scope scopes permission permissions access role roles authentication auth rotation-
    policy expires_in ttl id ids name names type types see ask check use using fingerprint kid
    alg typ ошибки ошибка ошибок erreur fehler error errors revoked widerrufen revogada revocada
    révoquée revocata unieważniony iptal отозван cambiato cambiata cambiati scaduto bitte
    gespeichert geändert abgelaufen tresor passwortmanager steht liegt verlopen gewijzigd kluis
    aangevraagd scaduta cambiata wygasło wygasł zmienione zmienione istekla promijenjena süresi
    doldu değişti utgånget ändrat udløbet vanhentunut lejárt expirou trocada alterada vencida
    vencido cambiado expirada guardada cambiada caducada gestor bóveda está stockée changé
    expiré coffre gestionnaire est masked redacted removed hidden
        postal post articolo artículo article artikel product producto prodotto produit produkt
    помилки خطای pos poskod order pesanan numero número nummer telefono teléfono phone
        identité d'identité identity
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
# A value that is a placeholder or says where the secret is.
_PLACEHOLDER = re.compile(
    r"^(?:\$(?-i:[{(]|[A-Z_][A-Z0-9_]*(?![a-z0-9])|[a-z_][a-z0-9_]*$)|[%<\[{]|\{\{|os\.|env\.|process\.env|secrets?\.|vault:|op://|ref\+|arn:|\*{3,}"
    r"|(?:x{3,}[-_.]?)+$|y{3,}$|\.{3,}|•{3,}|redacted|hidden|masked|censored|example|placeholder"
    r"|replace[_-]?me|change[_-]me(?:[_-][a-z]+)*[`'\"]*$|fixme|dummy|sample|test123|none|null|nil|true|false"
    r"|undefined|todo|tbd|[a-z]+(?:_[a-z]+)*_$|ssh-(?:rsa|ed25519|dss)|ecdsa-sha2|sk-ssh|age1|sha256:|sha1:|md5:"
    r"|AAAA[A-Z0-9])|.*(?:\.\.\.|…)",
    re.IGNORECASE,
)
# Password managers: a word naming one says where the password is, not what it is.
_MANAGERS = re.compile(r"(?i)1password|bitwarden|lastpass|keepass|passbolt|dashlane|cyberark")
# Parts of a placeholder name ("your_password_here", "tu_contraseña_aqui"), and the password
# managers a reference names ("1Password'da").
_PLACEHOLDER_PARTS = re.compile(
    # ("ici", "hier", "qui" only as a part of their own: not inside quiet, hierarchy, felicity)
    r"(?i)your|yours|here|aqui|aquí|(?<![^\W\d_])(?:ici|hier|qui)(?![^\W\d_])|tu_|dein|votre"
    r"|mein|my_|insert|enter|fill"
    r"|_kamu|_anda|isi_dengan|ihr_|tuo_|seu_|sua_|twoj|jouw_|uw_|ваш"
    r"|replace|1password|bitwarden|lastpass|keepass|passbolt|dashlane|keeper|vault|cyberark"
    r"|hashicorp|infisical|akeyless|conjur|thycotic|example"
)

_TOKEN = re.compile(r"\S+")
# A variable where a value would be: $DB_PASSWORD, ${X}, $(vault read ...); not "$4ffr0n.v0rt".
_VARIABLE = re.compile(r"\$(?:[{(]|[A-Z_][A-Z0-9_]*(?![a-z0-9])|[a-z_][a-z0-9_]*$)")
_EDGE = "\"'“”‘’«»„‚()[]{}<>`「」『』"
# Characters a password or key is written with besides letters and digits.
_SYMBOLS = set("!@#$%^&*+=?~_|\\/.:-")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2}[-:]?){8,}[0-9a-fA-F]*")
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_HOST = re.compile(r"[a-z0-9\-]+(?:\.[a-z0-9\-]+)*\.[a-z]{2,}(?::\d+)?")
_VERSION = re.compile(r"v?\d+(?:\.\d+)+(?:[-+][\w.]+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}[./]\d{1,2}[./]\d{2,4}|\d{1,2}:\d{2}(?::\d{2})?")
_AMOUNT = re.compile(r"[\d.,]+(?:ms|s|m|h|d|w|kb|mb|gb|tb|k|%|x|px|rpm|rps|usd|eur)", re.I)
_TICKET = re.compile(r"(?:No|Nr|N°|#)?[A-Z][A-Z0-9]{1,9}-\d+")
_EMAIL = re.compile(r"[\w.+\-]+@[\w\-]+\.[\w.\-]+")
# Lower-case names joined by hyphens (hosts, pods, services): "db-prod-3", "api-7d9f8-x2k4q".
_SLUG = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)+")
# Scripts that do not space their words: a value ends where they begin again.
_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uac00-\ud7af\uff00-\uffef\u0e00-\u0e7f]")
# A word that ends its sentence right after the credential word: "the OTP. Call ..."


def _folded(word: str) -> str:
    return unicodedata.normalize("NFKC", word).casefold()


def literal_alternation(words: Iterable[str]) -> str:
    """A pattern that matches any of ``words`` (the longest at a place), as a trie, so that
    the engine tries few alternatives at each position."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: dict[str, Any]) -> str:
        branches = [re.escape(c) + pattern(rest) for c, rest in sorted(node.items()) if c]
        if not branches:
            return ""
        body = "(?:" + "|".join(branches) + ")" if len(branches) > 1 else branches[0]
        return f"(?:{body})?" if "" in node else body

    return pattern(trie)


def _spellings(word: str) -> list[str]:
    """``word`` as written with a space, an underscore, a hyphen or nothing where its list
    has a hyphen ("api-key": "api key", "api_key", "api-key", "apikey")."""
    if "-" not in word:
        return [word]
    return [word.replace("-", sep) for sep in (" ", "_", "-", "")]


_ALL_WORDS = frozenset(
    spelling
    for word in _PASSWORD_WORDS + _CODE_WORDS + _KEY_WORDS
    for cased in {word.lower(), word.casefold()}  # κωδικός, κωδικόσ
    for spelling in _spellings(cased)
)
# Endings that make a compound a word for a code (Tresorcode, dörrkoden, ovikoodi), and the
# compounds that name something else.
_CODE_ENDINGS = ("code", "kod", "koden", "kode", "koodi", "kód")
_NOT_CODES = re.compile(
    r"(?:bar|uni|op|de|en|qr|short|post|zip|geo|trans|hard|source|pseudo|micro|byte|area"
    r"|country|error|exit|status|promo|dis|color|colour|time|zeit|sort|fehler|fel|virhe|hata"
    r"|erreur|antwort|land|länder|laender|rabatt|gutschein|farb|ländercode|fout|hiba|chyb|pos"
    r"|hiba|virhe|version|build|release|item|reason|return|response|result|currency|lang"
    r"|language|locale|region|event|class|type|message|msg|reference|ref|http|exit|iso|unicode"
    r"|barcode|qrcode|opcode|bytecode|sourcecode|hex|char|key|keys|scan|station|airport|city"
    r"|product|sku|article|artikel|tracking|invite|referral|vendor|customer|client|account"
    r"|zip|postal|post|sort|bank|routing|branch|swift|tax|vat|hs|naics|sic)(?:code|kod|kód|koodi)"
)
_NUMBER_SEARCH = re.compile(r"(?<!\w)(?:" + literal_alternation(_NUMBER_WORDS) + r")(?!\w)")
_WORD_SEARCH = re.compile(literal_alternation(sorted(_ALL_WORDS | set(_CODE_ENDINGS))))


def lowered(text: str) -> str:
    """``text`` in lower case, each character where it was (a few lengthen in lower case)."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _spaced_script(char: str) -> bool:
    """Whether ``char`` is of a script that spaces its words (Latin, Greek, Cyrillic)."""
    return char.isascii() or "\u00c0" <= char <= "\u04ff"


# Hebrew and Arabic join a few one-letter words to the next (ו "and", ה "the", ال "the"):
# a credential word may follow those, and no other letters.
_PREFIXED_SCRIPT = re.compile(r"[\u0590-\u06ff]")
_WORD_PREFIXES = re.compile(r"[והבלמשכ]{1,3}|(?:[وفبلك]?(?:ال)?|[وف]?[بلك])")


_LAST_KEYWORDS: tuple[str, tuple[tuple[int, int], ...]] = ("", ())


def _keywords(text: str) -> tuple[tuple[int, int], ...]:
    """Where the credential words of ``text`` are (see :func:`_find_keywords`); several rules
    ask for one text in a row, so the last answer is kept."""
    global _LAST_KEYWORDS
    last = _LAST_KEYWORDS  # (one read: another thread may replace it meanwhile)
    if last[0] == text and text:
        return last[1]
    found = tuple(_find_keywords(text))
    _LAST_KEYWORDS = (text, found)
    return found


def _find_keywords(text: str) -> Iterator[tuple[int, int]]:
    """Where the credential words of ``text`` are: a word in a script that spaces its words
    must start a word (or follow ``_``, ``-``, a digit); one in another script may be joined
    to the word before it ("wifi密码", "وكلمة المرور"); a compound that ends in a word for a
    code counts from its start ("Tresorcode")."""
    low = lowered(text)
    for match in _WORD_SEARCH.finditer(low):
        start, end = match.span()
        before = text[start - 1] if start else ""
        if not (before and before.isalpha() and _spaced_script(low[start])):
            if before.isalpha() and _PREFIXED_SCRIPT.match(low[start]):
                begin = start
                while begin > 0 and text[begin - 1].isalpha():
                    begin -= 1
                if not _WORD_PREFIXES.fullmatch(text[begin:start]):
                    continue  # inside a longer word: מיקוד (a postal code) is not קוד
            yield start, end
            continue
        if match.group() in _CODE_ENDINGS or match.group().endswith(_CODE_ENDINGS):
            begin = start
            while begin > 0 and text[begin - 1].isalpha():
                begin -= 1
            if 3 <= start - begin <= 12 and not _NOT_CODES.fullmatch(low[begin:end]):
                yield begin, end
    yield from _mistyped(text)


# The long words for a password, which people mistype ("Passwrot", "pasword", "contrasña"):
# a word one typing slip from one of these (a letter added, lost, changed or two swapped)
# counts as it.
_TYPED_WORDS = (
    "password", "passwort", "passwords", "wachtwoord", "contraseña", "contrasena", "kennwort",
    "passphrase", "lösenord", "salasana", "adgangskode", "credentials", "zugangsdaten",
    "parola", "parolă", "passord",
)  # fmt: skip
_TYPO_CANDIDATE = re.compile(
    r"(?i)\b(?:p[a-z]{5,10}|co[^\W\d_]{7,9}|wa[a-z]{7,9}|ke[a-z]{6,8}|l[oö][a-z]{6,8}"
    r"|sa[a-z]{6,8}|ad[a-z]{9,11}|cr[a-z]{9,11}|zu[a-z]{10,12})\b"
)
_TYPED_BY_START: dict[str, tuple[str, ...]] = {}
for _typed in _TYPED_WORDS:
    _TYPED_BY_START[_typed[:2]] = (*_TYPED_BY_START.get(_typed[:2], ()), _typed)
    _TYPED_BY_START[_typed[0] + _typed[2]] = (
        *_TYPED_BY_START.get(_typed[0] + _typed[2], ()),
        _typed,
    )


def _one_slip(word: str, target: str) -> bool:
    """Whether ``word`` is ``target`` with one letter added, lost or changed, or two
    neighbours swapped."""
    if word == target or abs(len(word) - len(target)) > 1:
        return False
    if len(word) == len(target):
        diff = [i for i in range(len(word)) if word[i] != target[i]]
        return len(diff) == 1 or (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and word[diff[0]] == target[diff[1]]
            and word[diff[1]] == target[diff[0]]
        )
    short, long_ = (word, target) if len(word) < len(target) else (target, word)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


def _mistyped(text: str) -> Iterator[tuple[int, int]]:
    """Where ``text`` holds a long credential word mistyped by one slip."""
    for match in _TYPO_CANDIDATE.finditer(text):
        word = match.group().casefold()
        targets = _TYPED_BY_START.get(word[:2], ()) + _TYPED_BY_START.get(word[0] + word[2], ())
        if targets and word not in _ALL_WORDS and any(_one_slip(word, t) for t in targets):
            yield match.span()


def _is_keyword(value: str) -> bool:
    """Whether ``value`` is itself a credential word ("password", "API-Key")."""
    folded = _folded(value)
    return folded in _ALL_WORDS or (
        folded.endswith(_CODE_ENDINGS) and not _NOT_CODES.fullmatch(folded) and len(folded) > 6
    )


_CODE_SET = frozenset(_CODE_WORDS)
_PASSWORD_SET = frozenset(w.casefold() for w in _PASSWORD_WORDS)
_KEY_SET = frozenset(w.casefold() for w in _KEY_WORDS)
# Code words that make a number after them a credential by themselves; the others ("code",
# "kod", "código") need a connector first ("the door code is 4711", not "error code 5000").
_STRONG_CODES = frozenset(
    {"pin", "pincode", "pin-code", "passcode", "code-pin", "tan", "otp", "digicode", "puk"}
    | _CARD_CODES
)
# Words that begin with a credential word but mean something else.
_FALSE_FRIENDS = re.compile(
    r"(?i)secretar|tokeni[sz]|passag|passeng|passion|passiv|passport|passat|passend|passier"
    r"|passé|passe-|keyboard|keynote|keystone|codec|coded|codeb|coder|codes?-?review|pinned"
    r"|pinning|pink(?!od)|pint|pine|signal|signed|signup|signin|siga|tokenomics|clavier"
)
_LIST = re.compile(literal_alternation([w.casefold() for w in _LIST_WORDS]))


def _stripped(token: str) -> tuple[str, int]:
    """``token`` without quotes and brackets around it, a trailing comma, semicolon or full
    stop; and how many characters went from its start."""
    start, end = 0, len(token)
    while start < end and token[start] in _EDGE:
        start += 1
    while end > start and token[end - 1] in _EDGE + ",;.:":
        end -= 1
    run = len(token[start:end]) - len(token[start:end].rstrip("!?"))
    if run >= 2 and end - start > run:
        end -= run  # "case5!!": the sentence's, not the value's
    cjk = _CJK.search(token, start, end)
    if cjk is not None and cjk.start() > start:
        end = cjk.start()
        while end > start and token[end - 1] in _EDGE + ",;.:":
            end -= 1  # "3529(カード...": the bracket opens what follows
    comma = token.find(",", start, end)
    if comma > start and token[comma + 1 : comma + 2].isalpha():
        end = comma  # "ID,Secret": a list, one word at a time
    return token[start:end], start


def _classes(value: str) -> tuple[bool, bool, bool, bool]:
    lower = any(c.islower() for c in value)
    upper = any(c.isupper() for c in value)
    digit = any(c.isdigit() for c in value)
    symbol = any(c in _SYMBOLS for c in value[1:-1]) if len(value) > 2 else False
    return lower, upper, digit, symbol


def _random_slug(value: str) -> bool:
    """Whether a lower-case name joined by hyphens is random rather than a name: a long
    part mixing letters and digits (akab-4fy9nbiu42d8abyh-...), a UUID, long hex."""
    if _HEX.fullmatch(value) or _UUID.search(value) or re.search(r"[0-9a-f]{16,}", value):
        return True
    return any(
        len(p) >= 14 and any(c.isdigit() for c in p) and any(c.isalpha() for c in p)
        for p in re.split(r"[-_.]", value)
    )


_DOTTED = re.compile(r"[a-z][a-z_]*(?:\.[a-z_][A-Za-z_]*)+")


def _re_dotted(value: str) -> bool:
    """Whether ``value`` is a dotted name of letters with one part in camelCase or three
    parts or more (auth.existingSecret, spring.datasource.password)."""
    return _DOTTED.fullmatch(value) is not None and (
        value.count(".") >= 2 or any(c.isupper() for c in value)
    )


def _identifier(value: str) -> bool:
    """Whether ``value`` is written as a host, path, address, version, date, amount, ticket,
    email or placeholder: something other than a credential."""
    if _PLACEHOLDER.match(value) or _PLACEHOLDER_PARTS.search(value):
        return True
    if '":' in value or value[0] in ",;" or (value.startswith("eyJ") and "." not in value):
        return True  # a piece of JSON; a JWT's header or claims alone (nothing signed)
    if _re_dotted(value):
        return True  # a setting's name: auth.existingSecret, spring.datasource.password
    if re.fullmatch(
        r"(?:[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[a-z][a-z0-9]*(?:[_.][a-z0-9]+)+)=[^=].*"
        r"|\(?(?:sensitive|known)\b.*",
        value,
    ):
        return True  # an assignment (its own rule reads it); Terraform's "(sensitive value)"
    if re.fullmatch(r"[a-z0-9_.\-]+(?:/[a-z0-9_.\-]+){2,}|[A-Z0-9]{2,}:[a-zäöå]{1,4}\??", value):
        return True  # a path (projects/acme/secrets/db/versions/latest); AD:ssa (Finnish)
    if re.fullmatch(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|#[0-9A-Fa-f]{3,8}", value):
        return True  # a variable's name (DB_HOST), a colour (#0D1117)
    if "://" in value or value[0] in "/~" or value.startswith(("./", "..", "\\\\")):
        return True
    if re.fullmatch(
        r"0x[0-9a-fA-F]{1,16}|(?i:rs|hs|es|ps)\d{3}|(?i:sha|aes|rsa|md|crc)[-_]?\d+", value
    ):
        return True  # an error number, an algorithm
    if re.match(r"\d{1,2}[:.]\d{2}(?:[:.]\d{2})?(?:\W|$)", value):
        return True  # a time, in any language's way of saying it: 14:03-kor, 9.30h
    if re.match(
        r"(?i)(?:hmac-)?(?:sha\d+|md5|blake2b?)[:-]|(?:ed25519|curve25519|rsa|ecdsa):", value
    ):
        return True  # a hash, named by its algorithm
    if re.fullmatch(r"system:[a-z][a-z\-]*(?::[a-z0-9][\w.\-]*)*", value):
        return True  # a Kubernetes user or group: system:serviceaccount:ops:viewer
    if re.fullmatch(r"[a-z_.]+:[a-z_.*]+|[a-z]+(?:\.[a-z]+){2,}=\S*", value):
        return True  # a scope (feature_flag:write), a dotted setting (sasl.jaas.config=...)
    if re.match(r"[A-Za-z_][\w.]*\([\"'\w]", value) and "(" not in value[:2]:
        return True  # a call in code: retrieve_artifact("..."), getenv("X")
    if re.fullmatch(r"[a-z_][a-z0-9_.]*\[[\"']?", value):
        return True  # a lookup in code: cfg["api_key"], os.environ['TOKEN']
    if re.fullmatch(
        r"(?:application|text|image|audio|video|multipart|font|model|message)"
        r"/[a-z0-9][\w.+\-]*(?:;\S*)?",
        value,
    ):
        return True  # a media type: Accept: application/json
    if re.fullmatch(r"[\u05d1\u05d4\u05d5\u05db\u05dc\u05de\u05e9]{1,2}-\S+", value):
        return True  # a Hebrew prefix joined to a name by a hyphen: ה-Jupyter ("the Jupyter")
    if value[0] == "-" or re.search(r"\[[A-Za-z0-9_\-]+\]\{|\\[dws]", value):
        return True  # a flag; a regular expression
    if re.search(
        r"(?i)\.(?:txt|pem|key|json|ya?ml|env|conf|cfg|ini|crt|cer|p12|pfx|jks|token)$", value
    ):
        return True  # a file that holds it
    if re.match(r"(?:pk_(?:live|test)_|pk\.eyJ)", value):
        return True  # a publishable key: public by design
    if _is_keyword(value) or _folded(value) in _ABOUT:
        return True
    return any(p.fullmatch(value) for p in (_HOST, _VERSION, _DATE, _AMOUNT, _TICKET, _EMAIL)) or (
        _SLUG.fullmatch(value) is not None and value.islower() and not _random_slug(value)
    )


def _identifier_besides_slug(value: str) -> bool:
    """Whether ``value`` is an identifier for a reason other than being words joined by
    hyphens (a host, a version, a file, a credential word, a placeholder)."""
    if _SLUG.fullmatch(value) and not (
        _HOST.fullmatch(value) or re.search(r"\.[a-z]{2,4}$", value) or _VERSION.search(value)
    ):
        return (
            _folded(value) in _ABOUT
            or _is_keyword(value)
            or placeholder(value)
            or any(_is_keyword(p) for p in re.split(r"[-_]", value))
        )
    return _identifier(value)


def _secret_looking(value: str, *, code: bool) -> bool:
    """Whether ``value`` reads as a password, key or token by itself: letters and digits
    mixed, symbols, mixed case, long hex or a UUID; a number of 4 to 10 digits after a PIN
    or code word (``code``)."""
    if value.isdigit():
        return code and 4 <= len(value) <= 8
    if len(value) < 6 or _identifier(value):
        return False
    if re.fullmatch(r"[A-Za-z][a-z]+(?:/[A-Za-z][a-z]+)+", value):
        return False  # a folder: Partner/Logistik
    if re.fullmatch(r"(?:[a-z]+|[A-Z]+)\d{1,4}", value) and len(value) <= 10:
        return False  # a name with a number: base64, sha256, ipv4, db01, TICKET42
    if (_HEX.fullmatch(value) and len(value) >= 16) or _UUID.fullmatch(value):
        return True
    lower, upper, digit, symbol = _classes(value)
    letters = lower or upper
    if letters and digit:
        return True
    if re.fullmatch(r"[^\W\d_]+(?:[-_.][^\W\d_]+)+", value) and all(
        p.islower() or p.istitle() or p.isupper() for p in re.split(r"[-_.]", value)
    ):
        return False  # words joined: Büro-Gast-Netz, read-only, Server_Room
    if letters and symbol and (digit or (lower and upper)):
        return True
    if re.fullmatch(r"[A-Z]?[a-z]{2,}(?:[A-Z]{1,3}[a-z]{2,})*[A-Z]{0,3}s?", value):
        return False  # CamelCase words: AccessDeniedException, CyberArk, PostgreSQL
    return lower and upper and len(value) >= 8 and not value[1:].islower() and not value.isupper()


def _strict(value: str) -> bool:
    """Whether ``value`` reads as a credential on its own, wherever it stands: 8 characters
    or more with a symbol, or digits with both cases; not an identifier."""
    lower, upper, digit, _ = _classes(value)
    symbol = any(c in "!@#$%^&*+?~|\\" for c in value)
    return (
        len(value) >= 8
        and (symbol or (digit and lower and upper))
        and _secret_looking(value, code=False)
        and not _identifier(value)
    )


_TECH_NAMES = frozenset(
    """
    base64 base32 base58 base16 b64 sha1 sha256 sha384 sha512 md5 crc32 utf8 utf-8 utf16 ipv4
    ipv6 h264 h265 x86 x64 arm64 amd64 i386 win32 win64 mp3 mp4 s3 ec2 k8s k3s oauth2 http2
    http3 tls1.2 tls1.3 aes128 aes256 rsa2048 rsa4096 ed25519 x509 pkcs12 pkcs8 ecdsa256
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
# Letters with few vowels, as a random password generator writes them (vcmblmrwombemtid).
_VOWELS = set("aeiouy")


def _random_letters(value: str) -> bool:
    """Whether ``value`` is ten or more lower-case letters too poor in vowels to be a word."""
    return (
        len(value) >= 10
        and value.isascii()
        and value.isalpha()
        and value.islower()
        and sum(c in _VOWELS for c in value) < 0.25 * len(value)
    )


def _stated(value: str) -> bool:
    """After a connector ("is", ":"): whether ``value`` can be a password though it is a
    plain word ("sonnenblume"): not a common word about passwords, long enough."""
    folded = _folded(value)
    if len(value) < 4 or _identifier(value) or folded in _SKIP or folded in _CONNECTORS:
        return False
    if folded in _PREPOSITIONS or folded in _ABOUT or len(set(value)) == 1:
        return False
    if value.isalpha() and value.islower() and len(value) < 8:
        return False  # a short plain word is more often a word than a password
    if re.fullmatch(r"[^\W\d_]+['’][^\W\d_]*[?!.]?", value) or '"' in value or value[0] in ",;:":
        return False  # a word with an apostrophe (it's, don't), a piece of JSON
    if value.isdigit() and len(value) == 4 and value[:2] in {"19", "20"}:
        return False  # a year
    if folded in _TECH_NAMES:
        return False  # base64, sha256, utf8: names with a number
    return not descriptive(folded)


# Endings of words that describe (participles, adverbs, adjectives, nouns of action) in the
# languages the rules read: "expired", "scritta", "geändert", "cambiado", "rotation".
_DESCRIPTIVE = re.compile(
    r"(?:ed|ing|ly|able|ible|ful|less|ive|ous|tion|ment|ness|iert|ado|ada|ido|ida|ados|adas"
    r"|idos|idas|ée|ées|és|ata|ato|ita|ito|uta|uto|tta|tto|ate|iti|ción|ção|zione)$"
)


def descriptive(word: str) -> bool:
    """Whether the lower-case ``word`` ends as a word that describes rather than names."""
    return _DESCRIPTIVE.search(word) is not None


# Words that a passphrase of words would not hold but a sentence about one would.
_FUNCTION_WORDS = frozenset(
    """
    you we i he she they it is are was the a an that which when what who where we've you've
    we're don't do does did not no never stored store chose chosen set generated
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)


def _spoken_digits(text: str, start: int) -> tuple[int, int] | None:
    """Where four or more digits said as words run from ``start`` ("zwei acht null fünf")."""
    end, count = start, 0
    for word in _TOKEN.finditer(text, start):
        folded = _folded(word.group().strip(",;.:!?()")).replace("-", " ")
        if all(part in _NUMBER_WORDS for part in folded.split()) and folded:
            end, count = word.end(), count + len(folded.split())
        elif folded not in {"y", "e", "und", "and", "i", "ja", "og", "och", "et", "-", "·"}:
            break
    return (start, end) if count >= 4 else None


# A letter named by a word: "B as in bravo", "R comme Robert", "S wie Siegfried".
_AS_IN = re.compile(r"(?i)\S (?:as in|like|comme|wie|como en|come|jak) \w+")
# Characters spaced out with names of cases and symbols among them.
_SPACED_WITH_NAMES = re.compile(
    r"(?i)\S(?: (?:\S|capital|caps|upper|lower|lowercase|uppercase|majuscule|minuscule"
    r"|maiuscola|minuscola|mayúscula|minúscula|maiúscula|großes?|kleines?|arobase|at|hash|dièse"
    r"|bang|dash|tiret|underscore|point|dot|étoile|star)){5,31}(?![^\s,;.])"
)
# Words that say a letter is a capital: "capital M", "P majuscule", "S maiuscola", "großes B".
_CASE_WORDS = frozenset(
    """
    capital caps upper uppercase big small lower lowercase majuscule minuscule maiuscola
    minuscola mayúscula minúscula maiúscula maiúsculo groß großes großer grosses kleines kleiner
    wielka wielkie duże mała małe hoofdletter kleine stor stort liten lille büyük küçük
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)


def _one_character(item: str) -> bool:
    """Whether a spelled-out item names one character: "i", "2", "#", "capital M",
    "P majuscule", "B as in bravo"."""
    if _AS_IN.fullmatch(item):
        return True
    words = item.split()
    if len(words) == 1:
        return len(words[0]) == 1
    return (
        len(words) == 2
        and any(len(w) == 1 for w in words)
        and any(_folded(w) in _CASE_WORDS for w in words)
    )


def _spelled_out(text: str, at: int) -> tuple[int, int] | None:
    """Where a password spelled out runs from ``at``, if one does, as a voice transcript or
    a careful speaker gives one: six characters or more spaced out, digits and letters or
    both cases (R n 7 O n O 4 2); or a list of six short items or more, one a character,
    number words among them but not all (K majuscule, huit, arobase, zèbre, deux, deux,
    dièse), each of one word but for two at most ("eme de mamá")."""
    spaced = re.match(r"\S(?: \S){5,31}(?![^\s,;.])", text[at:])
    if spaced is not None:
        chars = spaced.group().split()
        lower, upper, digit, _ = _classes("".join(chars))
        if all(len(c) == 1 for c in chars) and ((digit and (lower or upper)) or (lower and upper)):
            return at, at + len(spaced.group())
    named = _SPACED_WITH_NAMES.match(text, at)
    if named is not None:
        words = named.group().split()
        singles = [w for w in words if len(w) == 1]
        if len(singles) >= 6 and len(singles) >= len(words) - 3:
            return at, named.end()  # "S majuscule o l e i l 2 0 2 5 arobase"
    line_end = text.find("\n", at)
    items = re.split(r",[ \t]*", text[at : line_end if line_end >= 0 else len(text)])
    run: list[str] = []
    for item in items:
        words = item.split()
        if _AS_IN.fullmatch(item.strip()):
            run.append(item)  # "B as in bravo"
            continue
        if not 1 <= len(words) <= 3 or len(item) > 16:
            if words and len(run) >= 1:
                run.append(item)  # the last item may end the sentence: "dièse."
            break
        run.append(item)
    if len(run) > 1 and (len(run[-1].split()) > 3 or len(run[-1]) > 16):
        run.pop()  # what came after the list
    numbers = sum(_folded(i.strip(".;!?")) in _NUMBER_WORDS for i in run)
    single = sum(len(i.split()) == 1 for i in run)
    letters = sum(_one_character(i.strip(".;!?")) for i in run)
    if (len(run) >= 6 and numbers >= 2 and single >= len(run) - 2 and numbers < len(run)) or (
        len(run) >= 5 and letters >= max(3, len(run) - 2)
    ):
        said = re.match(rf"(?:[^,\n]+,[ \t]*){{{len(run) - 1}}}[^,\n]+", text[at:])
        if said is not None:
            return at, at + len(said.group().rstrip(" .;!?"))
    return None


def _window(
    text: str,
    start: int,
    *,
    code: bool,
    connected: bool = False,
    same_line: bool = False,
    own: frozenset[str] = frozenset(),
    phrase: bool = False,
    hyphened: bool = False,
) -> tuple[int, int] | None:
    """The value a credential word ending at ``start`` introduces, within the next words;
    ``code``: a number of 4 to 10 digits counts; ``connected``: a connector came already;
    ``hyphened``: words joined by hyphens count (a password's, not a key's)."""
    skip_next = False
    placed = False  # the words since a preposition say where: "the PIN on the back is 5092"
    first = True  # no word of content yet: "password policy" is about passwords
    paired = False  # an account was named: the next key-like word is its password
    numbers = code and connected  # a strong code word ("PIN") takes a number at once
    connected = connected and not code
    depth = 0  # inside a parenthesis: "für den Scanner (Kyocera im 2. OG) lautet ..."
    changed = False  # "changed", "endret": a "to" after it leads to the value
    count = -1
    for token in _TOKEN.finditer(text, start):
        raw = token.group()
        if depth or (raw.startswith("(") and not raw.endswith(")") and count >= 0):
            depth += raw.count("(") - raw.count(")")
            depth = max(depth, 0)
            continue
        count += 1
        if count >= 12:
            return None
        if count and text[start : token.start()].count("\n") > 1:
            return None  # a blank line ends what the word introduced
        if count == 0 and raw.startswith(".") and not raw.startswith(".."):
            return None  # "never got the OTP. Call ...": the sentence ended with the word
        if connected and raw.lstrip("\"'`").startswith(("{{", "${", "$", "<", "%", "{%")):
            return None  # a template or a variable, not a value
        if raw.rstrip(_EDGE + ",;").endswith(("...", "…")):
            return None  # a value cut short on purpose: "sk_live_..."
        if same_line and "\n" in text[start : token.start()]:
            return None  # NAME= with nothing after it on its line
        value, offset = _stripped(raw)
        folded = _folded(value)
        if not value:
            connected = connected or raw.strip(_EDGE) in {":", "=", ":=", "=>"}
            continue
        if count and not connected and "\n" in text[start : token.start()]:
            return None  # a new line, and nothing said it holds the value: a log, a list
        if (
            len(value) > 3
            and raw.strip("`'\"").endswith(":")
            and not raw.endswith("::")
            and folded not in _ABOUT
            and folded not in _QUALIFIERS
            and not descriptive(folded)
        ):
            connected, skip_next = True, False
            continue  # a label (auth.existingSecret:, "user":): what it names comes next
        if not code and re.fullmatch(r"[0-9a-f]{7,12}", value):
            return None  # a commit (8356b7c69): a key is longer
        if folded in own:
            connected = True
            continue
        if folded in _CONNECTORS or folded.rstrip(":=") in _CONNECTORS:
            dash = value in {"-", "—", "–"}
            if (
                not dash or (count == 0 and "\n" not in text[start : token.start()])
            ) and count <= 8:
                connected = True  # a dash joins only right after; "is" only near the word
                changed = changed or folded in _CHANGED
            continue
        where = (token.start() + offset, token.start() + offset + len(value))
        if (code or hyphened) and (connected or numbers or count == 0) and not skip_next:
            spaced = _READ_OUT_CODE.match(text, where[0])
            if spaced is not None and 4 <= sum(c.isdigit() for c in spaced.group()) <= 8:
                return spaced.span()  # read out: "3 9 0 7", "5-0-8-2", "39-12-77", "771 204"
        if connected and not skip_next and len(value) <= 12:
            spelled = _spelled_out(text, where[0])
            if spelled is not None:
                return spelled  # "is R n 7 O n O 4 2", "c'est K majuscule, huit, arobase, ..."
        if (
            hyphened
            and connected
            and not skip_next
            and value.isalpha()
            and len(value) >= 4
            and text[max(0, token.start() - 16) : token.start()].rstrip().endswith(":")
            and _CLAUSE_ENDS.match(text, where[1])
            and folded not in _ABOUT | _SKIP | _FUNCTION_WORDS | _SWITCHES
            and not descriptive(folded)
            and not _is_keyword(value)
        ):
            return where  # "hasło dla firmy ochroniarskiej: kasztan": a word, labelled
        if skip_next:
            skip_next = False
            if code and connected and re.fullmatch(r"\d{4,8}[#*]?", value):
                return where  # "endret til 85631": changed to
            if not _strict(value):
                connected = connected or raw.rstrip(_EDGE).endswith((":", "="))
                placed = True
                continue  # "for the nas", "на роутере": what it is for
            return where  # "changed to X", "поменял на X"
        if (code or connected) and folded in _NUMBER_WORDS:
            spoken = _spoken_digits(text, token.start())
            if spoken is not None:
                return spoken  # "one nine nine two": "one" is also a word read past
        if folded in _SKIP:
            continue
        if folded in _LOGINS or raw == "/":
            paired = True  # "admin / X", "user root, pass X": the value is next
            continue
        if folded in _CHANGED and (connected or count == 0):
            connected, changed = True, True
            continue  # "er endret til", "has been changed to": the value follows
        if folded in _PREPOSITIONS and raw.endswith(":") and not raw.endswith("::"):
            connected, skip_next = True, False
            continue  # "password it asks for: X": the colon says the value comes
        if folded in _PREPOSITIONS:
            if connected and changed and folded in _TO:
                if folded in _IN and re.match(r"\s+(?:19|20)\d\d\b", text[token.end() :]):
                    return None  # "changed in 2024": when, not to what
                continue  # "changed to"
            if connected:
                return None  # "is in the vault", "jest w 1Password": where it is
            skip_next = True
            continue
        if _MANAGERS.search(value):
            return None  # "1Passwordista", "in Bitwarden": where it is, not what it is
        numeric = code and (connected or numbers)
        if code and len(value) > 12 and not value.isdigit() and any(c.isdigit() for c in value):
            return None  # a code is short: what follows is something else (a digest, a key)
        if (
            (phrase or ((connected or count == 0) and hyphened))
            and re.fullmatch(r"[^\W\d_]+\d*(?:[-_.][^\W\d_]+\d*){2,}(?:[-_.]\d+)?", value)
            and not _identifier_besides_slug(value)
        ):
            return where  # a passphrase of words: velvet-thunder-pocket-gravel
        if (
            hyphened
            and connected
            and len(value) >= 4
            and (
                raw[0] in _QUOTES
                or text[max(0, token.start() - 16) : token.start()].rstrip()[-1:] in _QUOTES
            )
            and folded not in _ABOUT
            and any(c.isalnum() for c in value)
            and not descriptive(folded)
            and not _identifier(value)
            and not not_a_value(value)
        ):
            return where  # a word in quotes, said to be it: c'est « soleildulac »
        if phrase and connected and raw[0] in _QUOTES:
            close = text.find(_QUOTES[raw[0]], token.start() + 1, token.start() + 100)
            if close - token.start() > 3 and "\n" not in text[token.start() : close]:
                return token.start() + 1, close  # a phrase in quotes: «синий чайник под дождём»
        if phrase and connected and folded not in _SKIP and folded not in _FUNCTION_WORDS:
            words = re.match(r"(?:[^\W\d_]+\d*[ \u3000]+){2,9}[^\W\d_]+\d*", text[where[0] :])
            if words is not None and not _FUNCTION_WORDS & {
                _folded(w) for w in words.group().split()
            }:
                return where[0], where[0] + len(words.group())  # "tapfer Kerze Wolkenbruch"
        if _secret_looking(value, code=numeric) or (
            connected and _stated(value) and (not value.isalpha() or _random_letters(value))
        ):
            return where
        if (
            connected
            and hyphened
            and _SLUG.fullmatch(value)
            and any(c.isdigit() for c in value)
            and not _identifier_besides_slug(value)
            and not _VERSION.search(value)
        ):
            return where  # "pwd is sunflower_bakery09": words and digits, said to be it
        if paired and _stated(value) and not value.isalpha():
            return where
        if (
            numeric
            and re.fullmatch(
                r"\d{3,8}[#*]?|(?=.{4,10}$)\d+[A-Za-z][0-9A-Za-z]*|\d{1,2}(?:[-–]\d{1,2}){2,3}",
                value,
            )
            and not (_identifier(value))
        ):
            return where  # a door code: 27895#, 1615B
        if (numeric or connected) and value.isdigit() and len(value) == 1:
            digits = re.match(r"\d(?: \d){3,9}(?!\S)", text[where[0] :])
            if digits is not None:
                return where[0], where[0] + len(digits.group())  # "8 7 9 4 8 4"
        if connected and _identifier(value):
            return None  # "is see vault", "= your_password_here"
        was_connected, connected = connected, False  # a plain word: the statement goes on
        if (was_connected or first) and folded in _ABOUT and not placed:
            return None  # "password policy", "token endpoint": about credentials
        placed = False
        if _is_keyword(value):
            return None  # another credential word: its own window reads on from there
        first = False
        if raw.endswith((".", "!", "?", "。", ";")) and not connected:
            return None
        if raw.rstrip(_EDGE).endswith((":", "=")):
            connected = True
        elif raw.endswith(".") and count == 0:
            return None  # "never got the OTP. Call ...": the sentence ended
    return None


# Words that say a credential was changed, and the "to" that leads from them to its value.
_CHANGED = frozenset(
    """
    changed updated reset set endret ændret ændret ändrat ändrad geändert gewechselt cambiado
    cambiata cambiato changé changée gewijzigd veranderd zmieniony zmienione zmieniono
    muutettu alterado alterada mudado mudada trocado schimbat změněno změněn megváltozott
    değişti değiştirildi изменён изменен поменял поменяли змінено
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
_IN = frozenset(["in", "en", "w", "в", "im", "i"])
_TO = frozenset(
    ["to", "til", "till", "zu", "auf", "à", "a", "en", "na", "naar", "op", "in", "på", "för", "на",
     "в", "do", "la"]
)  # fmt: skip


def _in_template(text: str, at: int) -> bool:
    """Whether position ``at`` is inside ``{{ ... }}``, ``${...}`` or ``<...>`` on its line:
    a variable or a placeholder, whatever it is named."""
    line_start = text.rfind("\n", 0, at) + 1
    before = text[line_start:at]
    for opening, closing in (("{{", "}}"), ("${", "}"), ("<", ">"), ("{%", "%}")):
        opened = before.rfind(opening)
        if opened >= 0 and before.rfind(closing) < opened:
            return True
    return False


# "sha256 of the leaked token": what follows is a hash of the credential.
_HASH_OF = re.compile(
    r"(?i)\b(?:sha\d*|md5|hash|checksum|digest|fingerprint|huella|empreinte|fingerabdruck"
    r"|impronta|impressão|odcisk|отпечаток|відбиток|vingerafdruk|fingeravtryck|parmak)\b"
    r"\W+(?:\w+\W+){0,3}$"
)


_LOGGED_ATTEMPT = re.compile(r"(?i)\b(?:failed|accepted|invalid|bad|wrong)\s+$")
_FOR_AFTER = re.compile(r"\s+for\b")
_RECEIPT = re.compile(
    r"(?i)\b(?:receipt|card ending|terminal|approved|transaction|txn|quittung|ticket de caisse"
    r"|recibo|paragon|scontrino)\b"
)


def said_of_something_else(text: str, k_start: int, k_end: int) -> bool:
    """Whether the credential word at ``k_start:k_end`` names something other than a value
    that follows: a word that only begins like one ("secretary"), a name in a template,
    part of a URL, an ARN or a path, a command or a flag ("--password-stdin"), a hash of a
    credential, a qualified word ("public key", "cache key", "error code")."""
    if _FALSE_FRIENDS.match(text, k_start) or _in_template(text, k_start):
        return True
    token_start = max(text.rfind(c, 0, k_start) for c in " \t\n") + 1
    inside = text[token_start:k_start]
    if "://" in text[token_start : k_end + 40].split(" ")[0] or inside.startswith("arn:"):
        return True  # a URL's own rule reads it; an ARN names a secret, it is not one
    if inside.endswith(("/", ":")) and inside.rstrip("/:").strip("\"'`"):
        return True  # a path or a reference: kv/secret, kv:token
    if text[k_end : k_end + 1] == "/" and text[k_end + 1 : k_end + 2].isalnum():
        return True  # a path: secret/data/prod/db
    if inside.endswith("-") and (
        inside.startswith("-") or (inside.count("-") >= 2 and re.fullmatch(r"[a-z\-]+", inside))
    ):
        return True  # a flag or a command: --with-token, get-login-password
    if _HASH_OF.search(text, max(0, k_start - 40), k_start):
        return True  # "the sha256 of the leaked token was ...": a hash of it
    if _LOGGED_ATTEMPT.search(text, max(0, k_start - 12), k_start) and _FOR_AFTER.match(
        text, k_end
    ):
        return True  # sshd: "Failed password for invalid user admin from ... port 51422"
    if _RECEIPT.search(text, max(0, k_start - 200), k_end + 200) and re.search(
        r"(?i)\b(?:auth|approval|authori[sz]ation)\W*$", text[max(0, k_start - 16) : k_start]
    ):
        return True  # a card receipt's "auth code 0A3F12": the payment's, no way in
    if (
        text[k_end : k_end + 1] == "-"
        and re.match(r"-[a-z]", text[k_end:])
        and (k_start and text[k_start - 1] == "-")
    ):
        return True  # inside a name: kms-key-prod-eu
    after = text[k_end : k_end + 24].lstrip().casefold()
    if after.startswith(_NAMED_AFTER):
        return True  # "kod pocztowy", "code postal": named by the word after it
    before = re.search(r"([^\W_]+)[\s_\-]*$", text[max(0, k_start - 30) : k_start])
    previous = text[max(0, k_start - 30) : k_start].split()
    if (
        previous
        and re.fullmatch(r"\d(?:[\d,]*\d)?(?:\.\d+)?[kKmM]?", previous[-1])
        and not re.search(r"\d[ -]\d{4}\s*$", text[:k_start])
        and not (len(previous) > 1 and _OPENS_ANYWHERE.fullmatch(previous[-2]))
        and not (
            text[k_start:k_end].casefold() in _CODE_SET | _PASSWORD_SET
            and text[k_end - 1] not in "sS"
            and text[k_start - 1 : k_start].isspace()
        )  # "locker 14 combo", "id ... 901 password X": a singular word is no count
    ):
        return True  # a count: "11999 tokens", "3 keys"; not a card's last group before "PIN"
    return before is not None and _folded(before.group(1)) in _QUALIFIERS


def not_a_value(value: str) -> bool:
    """Whether ``value``, where a credential would be, is something else: a placeholder, a
    reference, a host, a path, a version, a date, a public key."""
    return _identifier(value) or placeholder(value)


# What may stand between a value and the word after it: "X — that's the root pw", "X ← to
# jest hasło", "X is the new wifi password".
_BEFORE_GAP = 6


def _said_before(text: str, k_start: int) -> tuple[int, int] | None:
    """A password said before its word on the same line, within a few words: only a value
    that reads as one by itself (symbols or digits with mixed case, 8 characters or more)."""
    line_start = text.rfind("\n", 0, k_start) + 1
    words = list(_TOKEN.finditer(text, line_start, k_start))[-_BEFORE_GAP:]
    for word in words:
        if word.end() == k_start:
            continue  # the front of the word the keyword ends ("…j3k0ww" in an event id)
        value, offset = _stripped(word.group())
        lower, upper, digit, _ = _classes(value)
        symbol = any(c in "!@#$%^&*+?~|\\" for c in value)
        strong = len(value) >= 8 and (symbol or (digit and lower and upper))
        quoted = "'" in value or '"' in value  # 'app'@'10.0.4.12': an account and its host
        named = re.search(
            r"(?i)(?:name|ssid|netzwerk|network|réseau|red|rete|sieć)\W{0,3}$",
            text[max(0, word.start() - 16) : word.start()],
        )
        if (
            strong
            and not quoted
            and not named  # "WLAN-Name: NH-Wedding-5G, Passwort steht ...": the network's name
            and _secret_looking(value, code=False)
            and not _identifier(value)
        ):
            start = word.start() + offset
            return start, start + len(value)
    return None


# Words that put a six-digit "PIN code" in an address (India's postal codes).
_POSTAL_CONTEXT = re.compile(
    r"(?i)[\u0900-\u097f]|\b(?:address|delivery|deliver|shipping|ship|courier|city|district"
    r"|state|office|branch|warehouse|parcel|post)\b"
)


def _after_keywords(text: str) -> Iterator[tuple[str, int, int]]:
    for k_start, k_end in _keywords(text):
        word = text[k_start:k_end].casefold().replace(" ", "-").replace("_", "-")
        kind = "password" if word not in _CODE_SET else "PIN or code"
        if word.endswith(_CODE_ENDINGS) and word not in _PASSWORD_SET:
            kind = "PIN or code"
        if word in _KEY_SET:
            kind = "API key or token"
        wifi = (
            kind == "PIN or code"
            and (_folded(word) in _PLAIN_CODES or word.endswith(_CODE_ENDINGS))
            and _WIFI.search(text, max(0, k_start - 80), k_end + 12)
        )
        if wifi:
            kind = "password"  # a Wi-Fi "code" is its password: "Gæste-wifi koden er hygge2025"
        # The word may go on ("parolası", "lösenordet", "DD_API_KEY_2"): up to four more
        # letters for a word of five or more, none for a short one ("pass", "key", "pin").
        end = k_end
        while end < len(text) and text[end].isalpha() and not _CJK.match(text[end]):
            end += 1
        if end > k_end and ((len(word) <= 4 and not _CJK.match(word)) or end - k_end > 4):
            continue
        if said_of_something_else(text, k_start, k_end):
            continue
        if (
            (
                word in {"pincode", "pin", "पिन"}
                or (word in {"code", "कोड"} and re.search(r"(?i)(?:pin|पिन)\s*$", text[:k_start]))
            )
            and re.match(r"(?:\s*(?:code|कोड))?\s*:?\s*[1-8]\d{5}(?!\d)", text[k_end:])
            and (word == "pincode" or _POSTAL_CONTEXT.search(text))
        ):
            continue  # an Indian postal code: six digits
        if word in _CARD_CODES and (
            not re.match(r"\s*:?\s*\d{3,4}(?!\d)", text[k_end:])
            or _TEST_CONTEXT.search(text, max(0, k_start - 120), k_start)
        ):
            continue  # no code; a test card's
        while (
            end < len(text) and text[end].isascii() and (text[end].isalnum() or text[end] in "_-")
        ):
            end += 1  # the rest of an identifier: DD_API_KEY_2, api-key-prod
        tail = _NAME_PARTS.findall(text[k_end:end]) if text[k_end : k_end + 1] in "_-" else []
        if tail and tail[-1].casefold() in _HOW_PARTS:
            continue  # a setting of how it is kept, not it: password_encryption, token_method
        opened = text.rfind("(", 0, k_start)
        if (
            text[end : end + 1] == ")"
            and opened > text.rfind(")", 0, k_start)
            and re.search(r"(?i)\b(?:id|ids|name|fingerprint)\W*$", text[:opened])
        ):
            continue  # "the key id (not the key) is X": an aside on an id, and X is the id
        inside = re.match(
            r"[ \t]*(?:[:=：]|は|是|为|는|은|이|가|改成了?|改为|换成|改為|變成)[ \t]*", text[end:]
        )
        if inside:
            end += inside.end()
        # A code word of its own ("PIN", "Türcode", "ajtókód") takes a number at once; the
        # English and French "code" waits for a connector ("the door code is 4711"), and is
        # a credential only when a word before it says what it opens: a payroll, project,
        # area or promo code is not one.
        plain_code = _folded(word) in _PLAIN_CODES and not wifi
        opens = _OPENS_AFTER.match(text, end) if plain_code else None
        if opens is not None:
            end = opens.end()  # "code de la porte": the value comes after what it opens
        door = (
            _OPENS_ANYWHERE.search(text, max(0, k_start - 150), k_end + 60) is not None
            or _SENT_TO.search(text, k_end, k_end + 60) is not None
        )
        digits_next = re.match(rf"\s*{_CODE_DIGITS}", text[end:]) is not None
        if (
            opens is None
            and plain_code
            and not _OPENS.search(text, max(0, k_start - 30), k_start)
            and not (
                door
                and (
                    digits_next
                    or re.search(
                        r"(?:\bis|:|=|\bnow|\bist|\best|\bes|\bé|\bni|번호\w?|(?:changed|set|reset)"
                        r" to)(?:\W+(?:now|jetzt))?\W+" + _CODE_DIGITS,
                        text[end : end + 80],
                    )
                )
            )
            and not _READ_OUT_SAID.match(text, end, end + 80)
        ):
            continue  # a payroll, project or promo code: no digits said to be it
        strong = word in _STRONG_CODES or (
            kind == "PIN or code" and _folded(word) not in _PLAIN_CODES | {"code-pin"}
        )
        if plain_code and door and digits_next:
            strong = True  # "keypad ... new code 34648#": a door is named, the digits follow
        found = _window(
            text,
            end,
            code=kind == "PIN or code",
            connected=bool(inside) or strong,
            same_line=inside is not None and "=" in inside.group(),
            own=_OWN_CONNECTORS.get(_folded(text[k_start:k_end]), frozenset()),
            # (before the word, or right after it: "парольная фраза", a password phrase)
            phrase=any(w in _folded(text[max(0, k_start - 40) : end + 16]) for w in _PHRASE_WORDS),
            hyphened=kind == "password",
        )
        if found is None and kind != "API key or token":
            digits = _CJK_DIGITS.search(text, end, end + 24)
            if digits is not None:
                found = digits.span()
        if found is None and kind != "API key or token":
            # A password or code read out as digits after a connector: "Šifra za sef je
            # 2 7 7 4 0 1" (round 9).
            read_out = _SAID_TO_BE.search(text[end : end + 80])
            spoken = (
                None
                if read_out is None
                else re.search(_CODE_DIGITS + "$", read_out.group())
                if kind == "PIN or code"
                else _READ_OUT_CODE.search(read_out.group())
            )
            if read_out is not None and spoken is not None:
                found = (
                    end + read_out.start() + spoken.start(),
                    end + read_out.start() + spoken.end(),
                )
        if found is None and kind == "password":
            found = _said_before(text, k_start)
        said = text[found[0] : found[1]] if found is not None else ""
        if kind == "API key or token" and said.isdigit() and not 5 <= len(said) <= 12:
            continue  # a short number is not a key ("the key of 2022"), nor a document's long one
        if found is not None:
            yield kind, *found


# A name that holds a credential, assigned a value: NAME=value, NAME: value, "name": "value",
# name = 'value', --name value, NAME value on one line of a .env-like paste.
_ASSIGNED = re.compile(
    r"(?P<name>[A-Za-z_][\w.\-]{1,60})[\"']?[ \t]*(?::=|=>|[=:])[ \t]*"
    r"(?:[\"'](?P<q>[^\"'\n]{3,200})[\"']|(?P<v>[^\s\"',;}\]]{3,}))"
)
_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_CREDENTIAL_PARTS = frozenset(
    """
    pass password passwd pwd pw passphrase passcode secret secrets token tokens key apikey auth
    authtoken credential credentials creds cred sig signature session sessionid sid jsessionid
    phpsessid csrftoken xsrf cookie private privatekey pin otp totp seed mnemonic jwt bearer
    hmac dsn salt signing
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
# Parts that make such a name describe something else: "PUBLIC_KEY", "TOKEN_TTL", "key_id".
_OTHER_PARTS = frozenset(
    """
    public pub id ids name names type types file path dir url uri endpoint host port user
    username login email length len size count max min ttl timeout expiry expires expiration
    expire enabled enable disabled format version rotation days hours alg algorithm header
    prefix env var kind mode policy hint field label fingerprint hash hashed encrypted provider
    issuer audience scope scopes region bucket table column limit rate
        existing store ref source helper backend arn sha
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)


# The last part of a name that makes it a setting of how a credential is kept or checked,
# not the credential: password_encryption = scram-sha-256, TOKEN_SIGNING_METHOD = RS256.
_HOW_PARTS = frozenset(
    """
    encryption method mechanism cipher algorithm algo scheme policy format
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)


# Credential words that count inside a longer part of a name: PGPASSWORD, MYSQL_PWD, APIKEY.
_STEMS = ("password", "passwd", "passphrase", "secret", "token", "apikey", "pwd", "privatekey")


def _credential_name(name: str) -> bool:
    parts = [p.casefold() for p in _NAME_PARTS.findall(name)]
    if name.isalnum() and len(parts) >= 5 and len(name) < 3.5 * len(parts):
        return False  # random letters ("LqUDggcFXNPzMPwHtT"), not words: "Pw" in it is chance
    if parts[-2:] in (["session", "id"], ["sess", "id"]) or parts[-3:] == ["access", "key", "id"]:
        return True  # a session's id is its credential
    if (
        len(parts) >= 2
        and parts[-2] in {"hash", "hmac", "signing"}
        and parts[-1]
        in {
            "secret",
            "key",
        }
    ):
        return True  # vnp_HashSecret, HMAC_KEY: the secret that signs
    if not parts or parts[-1] in _OTHER_PARTS or any(p in _QUALIFIERS for p in parts):
        return False
    return any(p in _CREDENTIAL_PARTS or any(s in p for s in _STEMS) for p in parts)


# A key in base64 may begin with "/" and still be no path: 32 bytes or more, both cases and
# digits, no dots nor words between slashes (a WireGuard PrivateKey = /I9x…=).
_BASE64_KEY = re.compile(r"/[A-Za-z0-9+/]{39,}={0,2}")


def _base64_key(value: str) -> bool:
    """Whether ``value``, beginning with "/", is a key in base64 rather than a path."""
    return _BASE64_KEY.fullmatch(value) is not None and _mixed_and_long(value)


def _mixed_and_long(value: str) -> bool:
    """Whether ``value`` is 20 characters or more of digits and both cases (not the URL
    rule's _long_random in cairn.core.secrets, which asks less)."""
    lower, upper, digit, _ = _classes(value)
    return len(value) >= 20 and digit and lower and upper


# Values that say whether a setting is on, not what a secret is: "(using password: YES)".
_SWITCHES = frozenset(
    ["true", "false", "none", "yes", "no", "on", "off", "null", "nil", "required", "optional",
     "(sensitive", "sensitive", "(known"]
)  # fmt: skip


def _assignments(text: str) -> Iterator[tuple[str, int, int]]:
    if "=" not in text and ":" not in text:
        return
    at = 0
    while (match := _ASSIGNED.search(text, at)) is not None:
        at = match.end()
        if match.start() and text[match.start() - 1] in "!$@#+":
            continue  # a Matrix id (!room:server, @user:server): no setting, however it reads
        if not _credential_name(match.group("name")):
            if "=" in match.group(0)[match.end("name") - match.start() :]:
                at = match.end("name")  # "site: PHPSESSID=...": the value is a setting itself
            continue
        before = re.search(r"([^\W_]+)[ \t]+$", text[max(0, match.start() - 30) : match.start()])
        if before is not None and _folded(before.group(1)) in _QUALIFIERS:
            continue  # "build cache key: ...", "primary key = id": named by the word before
        if match.group("name").casefold() in {"cookie", "set-cookie"}:
            continue  # a cookie header: its pairs are read one by one (_headers_and_markup)
        group = "q" if match.group("q") is not None else "v"
        value = match.group(group)
        if group == "v":
            value = value.rstrip(".,;:!?")
            if value.endswith(")") and "(" not in value:
                value = value[:-1]  # "(using password: YES)": the bracket closes the sentence's
        if _PLACEHOLDER.match(value) or _PLACEHOLDER_PARTS.search(value) or len(set(value)) == 1:
            continue
        if re.fullmatch(r"[a-z]+(?:_[a-z]+)*[_-]", value):
            continue  # a prefix with nothing after it: sk_live_
        if (value.isdigit() and len(value) < 4) or value.casefold() in _SWITCHES:
            continue
        if (
            "://" in value
            or (value[0] == "/" and not _base64_key(value))
            or value[0] in "~%"
            or _VARIABLE.match(value)
            or ("/" in value and not _mixed_and_long(value))
        ):
            continue  # a URL (its own rule reads it), a path, a variable, a reference
        lower, upper, digit, _ = _classes(value)
        if (
            _identifier(value)
            and not _secret_looking(value, code=False)
            and not _base64_key(value)
            and not (lower and upper and digit)  # 'ri9-Vault-Oak-Tree' is no name
        ):
            continue  # a name: pg-app-credentials, ecr-login
        if group == "v" and value.isalpha() and not _stated(value):
            continue  # "token: see vault", "password: required"
        yield "credential in a setting", match.start(group), match.start(group) + len(value)


# Password flags of common commands: the value after them is a password or a token.
_FLAGS = re.compile(
    r"(?:^|\s)(?P<flag>(?:--[\w-]*(?:password|passwd|pass|token|secret|api-key|apikey)"
    r"|-storepass|-keypass|-srcstorepass|-deststorepass)(?=[=\s])|/p:"
    r"|-passin\s+pass:|-passout\s+pass:|-P(?=\s)|-N(?=\s)|-p(?=\s|\S)|-a(?=\s)|-w(?=\s)|-c(?=\s))[=\s]?\s*"
    r"[\"']?(?P<v>[^\s\"']{3,})"
)
# The commands whose one-letter flag takes a password: -p, -P, -a, -w mean other things to
# the rest (mkdir -p, ssh -p, minisign -P, ls -a).
_SHORT_FLAG_COMMANDS = {
    "-p": ("mysql", "mariadb", "mysqldump", "mysqladmin", "sshpass", "docker", "podman",
           "influx", "mongo", "mongosh", "mongodump", "mongorestore", "helm", "nerdctl",
           "buildah", "skopeo", "oras", "crane", "az", "sqlplus", "isql", "clickhouse-client"),
    "-P": ("sqlcmd", "bcp", "mysql", "osql", "ipmitool", "ssh-keygen"),
    "-N": ("ssh-keygen",),
    "-a": ("redis-cli", "keydb-cli", "valkey-cli"),
    "-w": ("ldapsearch", "ldapmodify", "ldapadd", "ldapdelete", "ldappasswd", "ldapwhoami"),
    "-c": ("snmpwalk", "snmpget", "snmpbulkwalk", "snmpset", "snmptable", "snmpgetnext"),
}  # fmt: skip


# A user given before a password flag: "-u czujniki -P X", "--username ops -p X".
_USER_FLAG = re.compile(r"(?:^|\s)(?:-u|-U|--user|--username|--login)[\s=]+\S+\s*$")


def _command_of(text: str, at: int) -> str:
    """The words before position ``at`` on its command line (since the line, a pipe or a
    semicolon began), each without its path."""
    line_start = max(text.rfind("\n", 0, at), text.rfind("|", 0, at), text.rfind(";", 0, at))
    words = text[line_start + 1 : at].split()
    return " ".join(w.strip("`'\"$").rsplit("/", 1)[-1] for w in words)


def _flags(text: str) -> Iterator[tuple[str, int, int]]:
    for match in _FLAGS.finditer(text):
        value = match.group("v")
        flag = match.group("flag")
        short = flag in _SHORT_FLAG_COMMANDS
        command = _command_of(text, match.start("flag"))
        if (
            short
            and not any(word.startswith(_SHORT_FLAG_COMMANDS[flag]) for word in command.split())
            and not (flag in {"-p", "-P"} and _USER_FLAG.search(command))
        ):
            continue  # -p, -P after a user flag (-u ops, --user ops) is a password anywhere
        if short and (value.isdigit() or (":" in value and value.replace(":", "").isdigit())):
            continue  # a port, a port mapping
        if short and not _secret_looking(value, code=False) and "ssh-keygen" not in command.split():
            continue
        if (
            _PLACEHOLDER.match(value)
            or value[0] in "/~%"
            or _VARIABLE.match(value)
            or "://" in value
        ):
            continue
        yield "password", *match.span("v")
    for match in re.finditer(r"echo\s+[\"']?(?P<v>[^\s\"'|]{4,})[\"']?\s*\|\s*sudo\s+-S", text):
        yield "password", *match.span("v")
    for match in re.finditer(r"-U\s+\S+?%(?P<v>[^\s'\"]{3,})", text):  # smbclient user%password
        yield "password", *match.span("v")


# Commands that take a password as a plain argument, and the lines of a .pgpass file: each
# with a word that must be in the text (lower case) for it to be tried at all.
_COMMANDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (trigger, re.compile(pattern, re.MULTILINE))
    for trigger, pattern in (
        ("htpasswd", r"htpasswd\s+(?:-\w+\s+)*-\w*b\w*\s+(?:-\w+\s+)*\S+\s+\S+\s+(?P<v>\S+)"),
        ("change_password", r"change_password\s+\S+\s+(?P<v>\S+)"),
        ("/user:", r"/user:\S+\s+(?P<v>[^\s/]\S+)"),
        (":", r"(?:^|\s)[`'\"]?[\w.*\-]+:(?:\d+|\*):[\w.*\-]+:[\w.*\-]+:(?P<v>[^\s`'\"]+)[`'\"]?$"),
        ("password", r"(?i:with\s+password\s+)[\"'](?P<v>[^\"'\n]{3,})[\"']"),
        ("identified", r"(?i:identified\s+by\s+)[\"'](?P<v>[^\"'\n]{3,})[\"']"),
        ("sqlplus", r"sqlplus\s+\w+/(?P<v>[^@\s]{3,})@"),
        ("securestring", r"ConvertTo-SecureString\s+[\"'](?P<v>[^\"'\n]{3,})[\"']"),
        ("secret ", r"(?:^|\s)(?:enable\s+)?secret\s+\d\s+(?P<v>\S{4,})"),
        ("community", r"snmp-server\s+community\s+(?P<v>\S{4,})"),
        ("-", r"(?<![\d-])(?P<v>\d{6}(?:-\d{6}){7})(?![\d-])"),
        ("ssh ", r"(?:^|\s)ssh\s+(?:-\w+\s+)*[\w.\-]+@[\w.\-:\[\]]+\s+[\"'`]?(?P<v>[^\s\"'`]{6,})"),
        ("sv_setsteamaccount", r"sv_setsteamaccount\s+(?P<v>[A-Fa-f0-9]{32})"),
        ("requirepass", r"(?i:requirepass|masterauth)\s+[\"']?(?P<v>[^\s\"']{3,})"),
        ("masterauth", r"(?i:requirepass|masterauth)\s+[\"']?(?P<v>[^\s\"']{3,})"),
        ("alias set", r"(?:^|\s)mc\s+alias\s+set\s+\S+\s+\S+://\S+\s+\S+\s+[\"']?(?P<v>[^\s\"']{3,})"),
        ("net use", r"(?i:net\s+use)\s+(?:[A-Za-z]:\s+)?\\\\\S+\s+(?P<v>[^\s/]\S{3,})"),
    )
)  # fmt: skip


def _commands(text: str) -> Iterator[tuple[str, int, int]]:
    low = text.lower()
    for trigger, pattern in _COMMANDS:
        if trigger not in low or (trigger == ":" and text.count(":") < 4):
            continue
        for match in pattern.finditer(text):
            value = match.group("v")
            if trigger == "ssh " and not _strict(value):
                continue  # ssh user@host uptime: a command run there, not its password
            if trigger == ":" and re.search(r"(?:[0-9A-Fa-f]{2}:){4}", match.group()):
                continue  # a fingerprint (14:58:A5:61:...), not a .pgpass line
            if not placeholder(value):
                yield "password", *match.span("v")


# HTTP headers that carry a credential: Authorization with any scheme, X-...-Key/Token/Team.
_HEADER = re.compile(
    r"(?i:authorization|proxy-authorization)\s*:\s*(?!basic\b|bearer\b)[A-Za-z][\w-]*\s+"
    r"(?P<a>[A-Za-z0-9._~+/=\-]{12,})"
    r"|(?:\bX-|\b(?i:private|api|access|auth)-)[\w-]*(?i:key|token|secret|team|auth|signature"
    r"|session|api)[\w-]*\s*:\s*"
    r"(?P<b>[A-Za-z0-9._~+/=\-]{12,})"
)
# A credential in an XML element: <password>X</password>, <apiKey>X</apiKey>.
_XML = re.compile(r"<(?P<name>[\w:.\-]{2,40})>(?P<v>[^<\s]{3,200})</(?P=name)>")
# "log in as svc_backup with X", "use X for the nas": a strict value only.
_WITH = re.compile(
    r"(?i:log\s?in|sign\s?in|login|ssh|connect)\s+(?:as\s+\S+\s+)?(?i:with|using|w/)\s+"
    r"[`'\"]?(?P<a>\S{8,}?)[`'\".,;]?(?:\s|$)"
    r"|\b(?i:use|try)\s+[`'\"]?(?P<b>\S{8,}?)[`'\"]?\s+(?i:for|on|to)\s"
)


# A cookie header's pairs: a long value of one is a session, whatever the cookie is named.
_COOKIE = re.compile(r"(?i:\b(?:set-)?cookie)\s*:\s*(?P<pairs>[^\n]+)")
_COOKIE_PAIR = re.compile(r"(?:^|;)\s*[\w.\-]+=(?P<v>[^;\s]{16,})")


# What must be in a text (lower case) for the header rule, and for the "log in with" rule.
_HEADER_WORDS = ("authoriz", "x-", "private-", "api-", "access-", "auth-")
_WITH_WORDS = ("log", "sign", "ssh", "connect", "use", "try")


def _headers_and_markup(text: str) -> Iterator[tuple[str, int, int]]:
    low = text.lower()
    if ":" in text and "cookie" in low:
        for header in _COOKIE.finditer(text):
            at = header.start("pairs")
            for pair in _COOKIE_PAIR.finditer(header.group("pairs")):
                value = pair.group("v")
                if (_secret_looking(value, code=False) or len(value) >= 24) and not placeholder(
                    value
                ):
                    yield "session cookie", at + pair.start("v"), at + pair.end("v")
    if ":" in text and any(w in low for w in _HEADER_WORDS):
        for match in _HEADER.finditer(text):
            group = "a" if match.group("a") else "b"
            if _secret_looking(match.group(group), code=False) or _UUID.fullmatch(
                match.group(group)
            ):
                yield "credential in a header", *match.span(group)
    if "</" in text:
        for match in _XML.finditer(text):
            if _credential_name(match.group("name")) and not placeholder(match.group("v")):
                yield "credential in a setting", *match.span("v")
    for match in _WITH.finditer(text) if any(w in low for w in _WITH_WORDS) else ():
        group = "a" if match.group("a") else "b"
        if _strict(match.group(group)):
            yield "password", *match.span(group)


# An account and its password, with no word for it: "(admin / X)", "admin:X".
_USER_PASS = re.compile(
    r"(?i:\bu(?:ser)?|login)\s*[:=]\s*\S+[\s,;]+(?i:p(?:w|wd|ass)?)\s*[:=]\s*(?P<v>\S{4,})"
)
_PAIR_WORDS = ("ubnt", "pi", "sa", "postgres", "oracle", "guest", "elastic", "grafana", "jenkins",
               "rabbit")  # fmt: skip
_PAIR = re.compile(
    r"(?<![\w@.])(?i:admin|administrator|root|ubnt|pi|sa|postgres|oracle|guest|elastic"
    r"|grafana|jenkins|rabbit|superuser)(?:\s*(?:/|:)\s*|\s+(?:is|=)\s+)[`'\"]?"
    r"(?P<v>[^\s/)\],;`'\"]{6,})"
)


# An account, then its password after a slash or on the next line, with no word for it:
# "ketoan01 / Mango-459-nebula", "sysadmin Zephyr-753-marmot_", "jdoe.admin\nGravel-62x".
_ACCOUNT_THEN = re.compile(
    r"(?<![\w@/.:-])[A-Za-z][\w.\-@]{2,40}(?:[ \t]+(?P<s>/)[ \t]+|[ \t]*\n[ \t]*)"
    r"[`'\"]?(?P<v>[^\s`'\"]{8,64})"
)
_ADMIN_THEN = re.compile(
    r"(?<![\w@/.:-])[\w.\-]*(?i:admin|root|svc|sysop|superuser)[\w.\-]*[ \t]+"
    r"[`'\"]?(?P<v>[^\s`'\"]{8,64})"
)
_ADMIN_WORDS = ("admin", "root", "svc", "sysop", "superuser")


def _pairs(text: str) -> Iterator[tuple[str, int, int]]:
    low = text.lower()
    admin = any(w in low for w in _ADMIN_WORDS)
    for pattern in (_ACCOUNT_THEN,) * (" / " in text or "\n" in text) + (_ADMIN_THEN,) * admin:
        for match in pattern.finditer(text):
            value = match.group("v").rstrip(".,;:!?")
            lower, upper, digit, _ = _classes(value)
            slashed = "s" in match.groupdict() and match.group("s") is not None
            if (
                ((slashed and digit and (lower or upper)) or (lower and upper and digit))
                and _strict(value)
                and "/" not in value
            ):
                yield "password", match.start("v"), match.start("v") + len(value)
    if ":" in text or "=" in text:
        for match in _USER_PASS.finditer(text):
            if not not_a_value(match.group("v")):
                yield "password", *match.span("v")
    if not admin and not any(w in low for w in _PAIR_WORDS):
        return
    for match in _PAIR.finditer(text):
        value = match.group("v")
        if _secret_looking(value, code=False) and not value.isdigit():
            yield "password", *match.span("v")


# Prefixes that providers put on their tokens: such a word is a token whatever follows.
_PREFIXES = (
    "hvs.", "hvb.", "hvr.", "dckr_pat_", "dckr_oat_", "bkua_", "shpat_", "shpss_", "shpca_",
    "shppa_", "glsa_", "glc_", "dop_v1_", "doo_v1_", "dor_v1_", "lin_api_", "lin_oauth_",
    "ntn_", "secret_", "dp.st.", "dp.pt.", "dp.ct.", "dp.sa.", "NRAK-", "NRAA-", "NRII-",
    "dapi", "AKCp", "PMAK-", "LTAI", "APP_USR-", "sk.eyJ", "sq0csp-", "sq0atp-", "EAAA", "pul-",
    "key-", "AGE-SECRET-KEY-1", "ATATT", "ATCTT", "figd_", "ops_eyJ", "sl.", "sntrys_",
    "sntryu_", "sgp_", "rubygems_", "pscale_pw_", "pscale_tkn_", "pscale_oauth_", "tfp_",
    "CLOJARS_", "ghr_", "glpat-", "gldt-", "glrt-", "glcbt-", "xoxe.", "xoxe-", "sk_live_",
    "rk_live_", "whsec_", "EAACEdEose0cBA", "AIza", "ya29.", "yc_", "pat", "oy2", "hf_",
    "nvapi-", "r8_", "gsk_", "csk-", "xai-", "fw_", "pplx-", "sk-or-v1-", "tvly-", "lsv2_",
    "hcaik_", "hcxik_", "squ_", "sqp_", "sqa_", "phx_", "v4.local.", "v4.public.", "v3.local.",
    "v2.local.", "v2.public.", "tskey-",
)  # fmt: skip
_PREFIXED = re.compile(
    r"(?<![\w.\-])(?:" + "|".join(re.escape(p) for p in _PREFIXES) + r")[A-Za-z0-9_\-.]{12,}"
)


def _prefixed(text: str) -> Iterator[tuple[str, int, int]]:
    for match in _PREFIXED.finditer(text):
        value = match.group().rstrip(".")
        lower, upper, digit, _ = _classes(value)
        if (
            (digit and (lower or upper) and not _HEX.fullmatch(value))
            or "atlasv1" in value
            or value.startswith(("AGE-SECRET-KEY-1", "key-"))
        ):
            yield "API key or token", match.start(), match.start() + len(value)


# A code in a list: letters and digits, 6 to 12, maybe in two halves ("a1b2c-3d4e5").
_CODE = re.compile(r"(?<![\w-])(?:[A-Za-z0-9]{4,6}[- ][A-Za-z0-9]{4,6}|[A-Za-z0-9]{6,40})(?![\w-])")


# What makes a listed secret words rather than codes: "seed phrase", "сид-фраза", "助记词".
_PHRASE_WORDS = (
    "phrase", "mnemon", "seed", "фраза", "frase", "zin", "fras", "lause", "fraza", "ifade",
    "词", "詞", "フレーズ", "ニーモニック", "문구", "words", "wörter", "mots", "palabras", "φράση",
)  # fmt: skip


def _listed(text: str) -> Iterator[tuple[str, int, int]]:
    """Codes and words after "recovery codes", "seed phrase" and the like."""
    for match in _LIST.finditer(lowered(text)):
        phrase = match.group().casefold()
        words = any(w in phrase for w in _PHRASE_WORDS)
        rest = text[match.end() : match.end() + 600]
        start = match.end() + (rest.find(":") + 1 if ":" in rest[:60] else 0)
        if words:
            spans = [
                m.span() for m in re.finditer(r"(?:\d{1,2}[.)]\s*)?[^\W\d_]{3,12}", text[start:])
            ][:24]
            if len(spans) >= 12:
                yield (
                    "seed phrase",
                    start + spans[0][0],
                    start + spans[11 if len(spans) < 24 else 23][1],
                )
            continue
        for code in _CODE.finditer(text, start, min(len(text), start + 600)):
            value = code.group()
            joined = value.replace(" ", "")
            paired = re.fullmatch(r"[A-Z0-9]{4,6}-[A-Z0-9]{4,6}", value) is not None
            if (paired or any(c.isdigit() for c in value)) and not (
                _is_keyword(joined) or any(p.fullmatch(joined) for p in (_VERSION, _DATE, _AMOUNT))
            ):
                yield "recovery code", *code.span()


# Groups spaced out as a key, a seed or a card is printed: four or more groups of 4 to 6
# letters and digits ("JVP5 SQ6H N1X7 1MZ0", "tlv7 khmv xd6g 32m2", "4784 3093 8379 4251").
_GROUPS = re.compile(r"(?<![\w-])[A-Za-z0-9]{4,6}(?:[ -][A-Za-z0-9]{4,6}){3,}(?![\w-])")


# Words that say a number is a payment card's, in the languages people pay in.
_CARD_WORDS = re.compile(
    r"(?i)\b(?:card|cards|karte|kreditkarte|carte|tarjeta|cartão|cartao|carta|kaart|karta|kort"
    r"|kart|kartı|карта|карты|visa|mastercard|amex|american express|discover|maestro|cvv|cvc"
    r"|exp(?:iry|ires)?|ablauf|vence|validade|scadenza)\b|カード|卡号|信用卡|카드|บัตร|بطاقة"
)
# Card numbers that payment providers publish for tests (and numbers built like them: a
# digit repeated, mostly zeros), which open nothing.
_TEST_CARDS = frozenset(
    """
    4242424242424242 4000056655665556 5555555555554444 2223003122003222 5200828282828210
    5105105105105100 378282246310005 371449635398431 6011111111111117 6011000990139424
    3056930009020004 36227206271667 3566002020360505 6200000000000005 4111111111111111
    4012888888881881 5454545454545454 4000000000000077 4000000000000002 4000000000009995
    4000002500003155 4000000000003220 4000000000000341 4000000000000069 4000000000000127
    4000000000000119 4000008400001629 4000000760000002 4000001240000000 4000004840008001
    """.split()  # noqa: SIM905 (a list of numbers reads best as prose)
)


# A card's security code said after its number: "exp 04/26 code 003", "CID 7789".
_CARD_CODE = re.compile(
    r"(?i)\b(?:code|cvv2?|cvc2?|cid|csc|security code|sec code|código(?: de seguridad)?"
    r"|sicherheitscode|prüfnummer|cryptogramme|codice)\W{0,3}(?P<v>\d{3,4})(?!\d)"
)


# "test card", "sandbox", "Adyen docs test Mastercard": the number after is for tests.
_TEST_CONTEXT = re.compile(
    r"(?i)\b(?:test|testing|sandbox|dummy|docs?|documented|staging|test mode)\b[^\n]{0,80}$"
    r"|4242 ?4242 ?4242 ?4242[^\n]{0,60}$"
)


# What makes an account number part of a way in: its PIN or password said with it.
_BANK_LOGIN = re.compile(
    r"(?i)\b(?:pin|tan|password|passwort|kennwort|hasło|haslo|senha|contraseña|mot de passe"
    r"|login|codice utente|online-banking|home banking|bankowości)\b"
)


def _iban(value: str, said: bool = False) -> bool:
    """Whether ``value`` is an IBAN (its check digits hold, or ``said``: the text calls it
    one): an account to pay into, printed in groups; public, unlike a card's number."""
    joined = re.sub(r"[ -]", "", value.removeprefix("IBAN "))
    if not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]{10,30}", joined):
        return False
    if said:
        return True
    moved = joined[4:] + joined[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _test_card(digits: str) -> bool:
    return digits in _TEST_CARDS or len(set(digits)) <= 3 or digits.count("0") >= len(digits) // 2


def _luhn(digits: str) -> bool:
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = int(d) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


# Advisory and ticket ids written in groups: GHSA-2x3c-4v5b-6n7m, CVE-2024-1234-...
_GROUPED_IDS = ("GHSA", "CVE", "PYSEC", "RUSTSEC", "GO", "OSV", "INC", "CHG", "RITM")


_BARCODE_BEFORE = re.compile(
    r"(?i)\b(?:ean|gtin|upc|isbn|barcode|bar code|código de barras|code-barres|strichcode)\W*$"
)


# Words that name the number after them as a reference, not a card: an invoice's OCR or
# reference number, a request, case, order or tracking id.
_ID_BEFORE = re.compile(
    r"(?i)\b(?:ocr(?:[- ]?(?:nummer|number|nr|no))?|(?:request|case|ticket|order|transaction"
    r"|tracking|shipment|invoice|customer|member|booking) (?:id|no|nr|number|#)"
    r"|viitenumero|referen[cz]e(?: number)?|référence|referencia|kid(?:-nummer)?)\W*$"
)


def _spaced(text: str) -> Iterator[tuple[str, int, int]]:
    cards = 0
    for match in re.finditer(
        r"(?<![\w.-])(?:[2-6]\d{12,18}|3[47]\d\d[ -]\d{6}[ -]\d{5})(?![\w.-])", text
    ):
        digits = re.sub(r"\D", "", match.group())
        if not 13 <= len(digits) <= 19 or _test_card(digits):
            continue
        if _TEST_CONTEXT.search(text, max(0, match.start() - 40), match.start()):
            continue
        if re.search(r"\d[ .]$", text[max(0, match.start() - 2) : match.start()]):
            continue  # the end of a longer number (a bank slip's line)
        if _BARCODE_BEFORE.search(text, max(0, match.start() - 24), match.start()):
            continue  # "EAN 5901234123457": a product's barcode (it passes Luhn's check too)
        if _ID_BEFORE.search(text, max(0, match.start() - 32), match.start()):
            continue  # "OCR 4471882201337", "request ID 2411...": a reference, named as one
        if _luhn(digits) or _CARD_WORDS.search(text):
            cards += 1
            yield "card number", *match.span()
            for code in _CARD_CODE.finditer(text, match.end(), match.end() + 80):
                yield "card code", code.start(), code.end("v")
    for match in _GROUPS.finditer(text):
        found = match.group()
        while re.search(r"[ -][A-Za-z]+$", found) and not re.search(r"[ -][A-Z]{4,6}$", found):
            found = re.sub(r"[ -][A-Za-z]+$", "", found)  # "4242 4242 4242 4242 with": a word
        if re.fullmatch(r"(?:[A-Za-z]+[ -])+\d{4}(?:[ -]\d{4})+", found):
            continue  # "test card 4242 ...": words, then a number read on its own below
        said = "IBAN" in text[max(0, match.start() - 20) : match.start() + 5]
        # An IBAN ends in a group of one to three: FR76 3000 6000 0112 3456 7890 189.
        last = re.match(r"[ -][A-Za-z0-9]{1,3}(?![\w-])", text[match.end() : match.end() + 5])
        whole = found + last.group() if last and found == match.group() else found
        iban = _iban(found, said) or (whole != found and _iban(whole, said))
        if (iban and not _BANK_LOGIN.search(text)) or _TEST_CONTEXT.search(
            text, max(0, match.start() - 40), match.start()
        ):
            continue  # an account number to pay to; a card number given for tests
        if len(re.split(r"[ -]", found)) < 4:
            continue
        joined = re.sub(r"[ -]", "", found)
        span = (match.start(), match.start() + len(found))
        if found.startswith(_GROUPED_IDS) or re.match(r"RF\d\d[ -]", found):
            continue  # an advisory or ticket id; a creditor reference (ISO 11649: RF18 0000 ...)
        if joined.isdigit():
            card = _luhn(joined) or _CARD_WORDS.search(text) is not None
            if 13 <= len(joined) <= 19 and card and not _test_card(joined):
                yield "card number", *span
                for code in _CARD_CODE.finditer(text, span[1], span[1] + 80):
                    yield "card code", code.start(), code.end("v")
            continue
        groups = re.split(r"[ -]", found)
        if " " not in found and found.islower() and any(g.isalpha() for g in groups):
            continue  # a name joined by hyphens: ingest-worker-5c7d9b-wgp1g
        printed = len({len(g) for g in groups[:-1]}) == 1 and len(groups[-1]) <= len(groups[0])
        with_digits = sum(any(c.isdigit() for c in g) for g in groups)
        lower, upper, _, _ = _classes(joined)
        if _HEX.fullmatch(joined):
            continue  # a fingerprint: A1B2 C3D4 ...
        if printed and 2 * with_digits >= len(groups) and (lower or upper) and len(joined) >= 16:
            yield "spaced key", *span  # as a key is printed: JVP5 SQ6H N1X7 1MZ0


# Lines that each hold one token-like word: a key wrapped by a terminal or an editor.
_WRAPPED = re.compile(r"(?:^[ \t]*[A-Za-z0-9+/=_\-.]{8,}[ \t]*(?:\n|$)){2,}", re.MULTILINE)


def _wrapped(text: str, found: list[tuple[str, int, int]]) -> Iterator[tuple[str, int, int]]:
    """A key or token wrapped over lines: the lines joined are read again, and after a line
    that names a key (``AES key ... (hex):``) a block of 24 characters or more is one."""
    if "\n" not in text:
        return
    for match in _WRAPPED.finditer(text):
        block = match.group().strip()
        if re.search(r"(?m)^[ \t]*[A-Za-z_][\w.]*=(?!=*$)", block):
            continue  # NAME=value lines: settings, each read by its own rule
        joined = re.sub(r"\s+", "", block)
        if len(joined) < 24 or any(s < match.end() and match.start() < e for _, s, e in found):
            continue
        before = text[max(0, match.start() - 120) : match.start()].rsplit("\n", 2)[-2:]
        named = any(_keywords(line) for line in before)
        lower, upper, digit, _ = _classes(joined)
        mixed = digit and (lower or upper) and ((lower and upper) or _HEX.fullmatch(joined))
        if named or (mixed and joined.startswith("eyJ")):
            start = match.start() + (len(match.group()) - len(match.group().lstrip()))
            yield "wrapped key", start, start + len(block)


_OPENING_QUOTES = "\"'„“«‘‚「『"
_CLOSING_QUOTES = re.compile("[\"'“”»’‘」』]")


def ui_string(text: str, start: int) -> bool:
    """Whether what stands at ``start`` opens, or is the first word of, a quoted phrase that
    itself names a credential ("Forgot your password?", „Gib dein Passwort ein“): words a
    screen shows, not a password."""
    if text[start : start + 1] in _OPENING_QUOTES:
        start += 1
    elif not (start and text[start - 1] in _OPENING_QUOTES) and not (
        start > 1 and text[start - 1] in " \u00a0\u202f" and text[start - 2] in "«„"
    ):
        return False  # (French and German quotes may stand a space away: « Afficher »)
    close = _CLOSING_QUOTES.search(text, start, start + 120)
    phrase = text[start : close.start() if close else start + 120].strip()
    return " " in phrase and bool(_keywords(phrase))


def placeholder(value: str) -> bool:
    """Whether ``value``, where a credential would be, is a placeholder or a reference to
    where the credential lives ("<your key>", "${DB_PASSWORD}", "tu_contraseña_aqui",
    "1Password")."""
    return bool(_PLACEHOLDER.match(value) or _PLACEHOLDER_PARTS.search(value))


# Public key material, never a secret however random it reads: certificates and public key
# blocks, SSH and age public keys.
_PUBLIC = re.compile(
    r"-----BEGIN (?P<b>CERTIFICATE|PUBLIC KEY|RSA PUBLIC KEY|SSH2 PUBLIC KEY|PGP PUBLIC KEY BLOCK"
    r"|CERTIFICATE REQUEST|X509 CRL)-----[\s\S]*?(?:-----END (?P=b)-----|$)"
    r"|(?:ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-\S+|sk-ssh-\S+|sk-ecdsa-\S+)\s+AAAA[A-Za-z0-9+/=]+"
    r"|(?<![\w-])age1[0-9a-z]{50,}"
    r"|ENC\[(?:AES256_GCM|PGP|KMS)[^\]]*\]"  # sops: encrypted, not secret in chat
    r"|\$ANSIBLE_VAULT;[\d.]+;\w+(?:;\w+)?\s+[0-9a-f\s]+"
)


def public_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds public key material (certificates, public keys)."""
    if not any(m in text for m in ("-----BEGIN", "AAAA", "age1", "ENC[", "$ANSIBLE_VAULT")):
        return []
    return [m.span() for m in _PUBLIC.finditer(text)]


# Cheap tests that tell most texts a rule cannot apply: four digits somewhere (spaced keys
# and cards), a flag, a separator, a long word (provider prefixes).
_FOUR_DIGITS = re.compile(r"\d\D{0,8}\d\D{0,8}\d\D{0,8}\d")
_LONG_WORD = re.compile(r"[A-Za-z0-9_\-.]{14,}")
_COMMAND_WORDS = (
    "htpasswd", "change_password", "/user:", "password", "identified", "sqlplus",
    "securestring", "secret ", "community", "-", "ssh ", "net use", "sv_setsteamaccount",
    "requirepass", "masterauth", "alias set",
)  # fmt: skip


# Number words that are also common words elsewhere ("en", "to", "et", "hat"): a run of
# spoken digits needs two others.
_AMBIGUOUS_NUMBERS = frozenset(
    """
    en et to ni sei hat bir isa un i e a oh one nine due tre do char che nau ek ba
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)


# A word that names a number as something open (a port, an extension, a room, a year),
# right before the number or with "is" between: what follows is that number, not a code.
_NUMBER_NAMED = re.compile(
    r"(?i)\b(?:port|ports|puerto|порт|poort|portti|extension|ext|durchwahl|room|zimmer"
    r"|floor|etage|page|seite|year|jahr|version|release|build|ticket|issue|order|invoice|vlan"
    r"|pid|line|row|step|flight|bus)"
    r"\s+(?:(?:is|was|=|:|number|no\.?|nr\.?|es|est|ist|é|è|er|är|on)\s+)?$"
)


def _spoken(text: str) -> Iterator[tuple[str, int, int]]:
    """Four digits or more said as words, in a row: a code read out ("zwei acht null fünf")."""
    if len(_NUMBER_SEARCH.findall(lowered(text))) < 4:
        return
    words = list(_TOKEN.finditer(text))
    at = 0
    while at < len(words):
        folded = _folded(words[at].group().strip(",;.:!?()")).replace("-", " ")
        if folded and all(p in _NUMBER_WORDS for p in folded.split()):
            span = _spoken_digits(text, words[at].start())
            if span is not None and _NUMBER_NAMED.search(text, max(0, span[0] - 40), span[0]):
                span = None  # "the port is five four three two": a number named as a port
            if span is not None:
                said = _folded(text[span[0] : span[1]]).replace("-", " ").split()
                clear = [
                    w.strip(",;.:!?()")
                    for w in said
                    if w.strip(",;.:!?()") not in _AMBIGUOUS_NUMBERS
                ]
                if len([w for w in clear if w in _NUMBER_WORDS]) >= 2:
                    yield "PIN or code", *span
                    while at < len(words) and words[at].start() < span[1]:
                        at += 1
                    continue
        at += 1


# A password's own look: letters of both cases, a digit and a symbol that names and ids do
# not use. Such a word is a password wherever it stands ("idrac root GTLZ!M0uk#n#Q9XMp32=").
_OWN_LOOK = re.compile(r"[^\s\"'`()\[\]{}<>]{8,}")
# A qualified name in code: com.acme.billing.Job.lambda$run$0, Foo.bar().
_PASSWORD_SYMBOLS = set("!#$%^&*?~|")  # not "+", "/" nor "=": base64 has those


# A symbol between two letters or digits: what every word of a password's look holds.
_SYMBOL_INSIDE = re.compile(r"\w[!#$%^&*?~|]+\w")


def _looks_like_a_password(text: str) -> Iterator[tuple[str, int, int]]:
    if _SYMBOL_INSIDE.search(text) is None:
        return
    for match in _OWN_LOOK.finditer(text):
        value = match.group().rstrip(".,;:!?")
        if value[0] in "!$#@" or not 8 <= len(value) <= 64 or not value.isascii():
            continue  # a Matrix id (!room, $event, #alias, @user); too short; not typed so
        body = value.rstrip("=")
        lower, upper, digit, _ = _classes(body)
        if not (lower and upper and digit and any(c in _PASSWORD_SYMBOLS for c in body)):
            continue
        if "://" in value or "/" in value or "\\" in value or "@" in value.lstrip("@")[1:]:
            continue  # a URL, a path, an address
        if _identifier(value) or re.search(r"[$%]\{|\{\{|\$\(|&&|\|\||[?&]\w+=", value):
            continue
        if re.fullmatch(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*){2,}", value):
            continue  # a qualified name in code: com.acme.Job.lambda$run$0
        yield "password", match.start(), match.start() + len(value)


# A Wi-Fi network as a QR code writes it: WIFI:T:WPA;S:name;P:password;;
_WIFI_QR = re.compile(r"WIFI:(?:[^;\n]*;)*?P:(?P<v>(?:\\.|[^;\\\n])+);")
# Words in a run that a seed phrase would not hold but prose in a Latin script would.
_PROSE_WORDS = frozenset(
    """
    the and to of is in that it for on with as was at be this have from or by not but what are
    we you they he she can will if my our your so do has had been were would there their when
    which them then than its just into out up de la el en y que los las del por con una para
    und der die das ist mit von den ein eine zu nicht het een van le les des et est pour dans
    une pas que il di che non per sono da e o a os as um uma com não na no do da dan yang di ke
    dari untuk dengan itu ini ada ve bir bu da ile için och att är som på för av med den det
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
_WORD_RUN = re.compile(r"(?<![\w-])(?:[a-z]{3,8}[ \t]+){11,23}[a-z]{3,8}(?![\w-])")
# Single digits spaced out after a word for what a code opens: "alarm panel: 8 2 2 9".
_SPACED_CODE = re.compile(
    r"(?i)\b(?:door|gate|alarm|safe|keypad|lock|padlock|locker|tür|porte|puerta|porta|alarme"
    r"|alarma|allarme|tresor|coffre|caja|lockbox|key ?box)\b[^\n\d]{0,40}?"
    r"(?P<v>(?<![\d\-–])\d(?:[ \-–]\d){3,9})(?![\d\-–])"
)
# A code keyed in: "punch 2972 and then OFF", "enter 4711#", with a word for what it opens
# before it in the message.
_KEYED_IN = re.compile(
    r"(?i)\b(?:punch|punch in|enter|type|key in|dial|press|tippe|tippen|eingeben|taper|tapez"
    r"|composer|digita|digite|marca|marque|teclea|introduce|wpisz|vul in|toets)\s+(?:in\s+)?"
    r"(?P<v>\d{4,8}[#*]?)(?![\w.:/])"
)
# Words that make digits keyed in a code: "service mode: ... enter 64088373".
_KEYED_CONTEXT = re.compile(
    r"(?i)\b(?:mode|override|manager|supervisor|admin|service menu|unlock|disarm|maintenance"
    r"|modo|modus|mode de|wartung|gestor|encargado|gerente)\b"
)
# A line that asks for a credential ("anyone know the pw for the demo tenant?"): the answer
# below it is the credential.
_ASKED = re.compile(r"\?[ \t]*\n(?:[ \t]*\n)*[ \t]*(?:(?:yeah|yes|yep|sure|ok|oui|ja|sí|si)\W+)?")


# Words that hand something over: "here you go: X", "use this: X", "aquí tienes: X".
_GIVEN = re.compile(
    r"(?i)\b(?:here you go|here it is|here you are|use this|try this|there you go|voilà|voila"
    r"|aquí tienes|aqui tienes|aqui está|toma|hier bitte|bitteschön|tieni|ecco|вот|держи"
    r"|proszę|alsjeblieft|alstublieft|här|varsågod|tässä|buyrun|ambil ini|ini dia)\s*[:,\-—]\s*"
    r"[`'\"]?(?P<v>[^\s`'\"]{8,64})"
)


_GIVEN_WORDS = (
    "here", "use this", "try this", "voil", "aqu", "toma", "bitte", "tieni", "ecco", "вот",
    "держи", "proszę", "alsjeblieft", "alstublieft", "här", "varsågod", "tässä", "buyrun",
    "ambil ini", "ini dia",
)  # fmt: skip


# An app-specific password as providers print it: four groups of four letters.
# An app password as Apple and Google print one: four groups of four letters, joined by hyphens
# or spaces.
_APP_PASSWORD = re.compile(r"(?<![\w-])[a-z]{4}([- ])[a-z]{4}\1[a-z]{4}\1[a-z]{4}(?![\w-])")
# A Mailgun key: 32 hex digits, then two groups of 8.
_MAILGUN = re.compile(r"(?<![\w-])[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}(?![\w-])")
# "the shared login is Ambulance635$": a login said to be a value that reads as a password.
_LOGIN_IS = re.compile(r"(?i)\blog-?in\s+(?:is|=|:|was|now)\s+[`'\"]?(?P<v>[^\s`'\"]{8,64})")


# Words that put a run of words in a wallet: without one, twelve plain words are a list of
# names (tags, tools) or generated text, not a seed phrase.
_WALLET = re.compile(
    r"(?i)wallet|seed|mnemonic|recovery|phrase|ledger|trezor|metamask|phantom|bitcoin|\bbtc\b"
    r"|\beth\b|ethereum|solana|crypto|faucet|mainnet|testnet|cold storage|backup words"
    r"|carteira|cartera|portefeuille|geldbörse|portafoglio|portfel|кошел|гаманець|cüzdan"
    r"|ウォレット|钱包|錢包|지갑|ví|dompet|محفظة|ארנק"
)


def _has_word_run(text: str) -> bool:
    """Whether ``text`` has twelve words in a row that a seed phrase could be made of (a
    cheap test before the pattern is tried)."""
    run = 0
    for word in text.split():
        if word.isalpha() and word.islower() and 3 <= len(word) <= 8 and word not in _PROSE_WORDS:
            run += 1
            if run >= 12:
                return True
        else:
            run = 0
    return False


def code_sent_after(before: str, text: str) -> tuple[int, int] | None:
    """Where ``text`` is a code and nothing else, sent right after a message that names a
    credential and gives none ("the alarm code for the back office is in the next message",
    then "6631"; "код від сейфу надішлю наступним повідомленням", then "41-09-66"); else None."""
    span = bare_code(text)
    if span is None or not any(True for _ in _keywords(before)):
        return None
    return span


def bare_code(text: str) -> tuple[int, int] | None:
    """Where the code is when ``text`` is a code and nothing else: "6631", "41-09-66",
    "7 2 5 5 0", "năm hai chín một tám"; else None."""
    code = re.fullmatch(rf"\s*({_CODE_DIGITS})\s*[.!]?\s*", text)
    if code is not None:
        return code.span(1)
    start = len(text) - len(text.lstrip())
    spoken = _spoken_digits(text, start) if start < len(text) else None
    if spoken is not None and not text[spoken[1] :].strip(" .!"):
        return spoken
    return None


def _answered(text: str) -> Iterator[tuple[str, int, int]]:
    """The credential that answers a question for one, on the lines below it."""
    for asked in _ASKED.finditer(text):
        line = text[text.rfind("\n", 0, asked.start()) + 1 : asked.start()]
        if not _keywords(line):
            continue
        word = re.match(r"[`'\"]?([^\s`'\"]{6,64})", text[asked.end() :])
        if word is None:
            continue
        value = word.group(1).rstrip(".,;:!?")
        lower, upper, digit, _ = _classes(value)
        symbol = any(c in "!@#$%^&*?~" for c in value)
        if (
            _secret_looking(value, code=False)
            and (digit and (lower or upper))
            and (symbol or (lower and upper) or (_HEX.fullmatch(value) and len(value) >= 20))
        ):
            start = asked.end() + word.start(1)
            yield "password", start, start + len(value)


def _table(text: str) -> Iterator[tuple[str, int, int]]:
    """The cells of a table's password column: "System | User | Pass" over its rows."""
    lines = text.split("\n")
    at = 0
    column = -1
    width = 0
    for line in lines:
        cells = line.split("|")
        if len(cells) >= 2:
            if column < 0:
                for i, cell in enumerate(cells):
                    head = _folded(cell.strip())
                    if head and (head in _PASSWORD_SET or head in _CODE_SET or head in _KEY_SET):
                        column, width = i, len(cells)
                        break
            elif len(cells) == width and not set(line) <= set("|-: \t"):
                before = sum(len(c) + 1 for c in cells[:column])
                value = cells[column].strip()
                if value and not placeholder(value) and len(value) >= 4:
                    start = at + before + cells[column].index(value)
                    yield "password", start, start + len(value)
        elif column >= 0 and line.strip():
            column = -1
        at += len(line) + 1


def _shaped(text: str) -> Iterator[tuple[str, int, int]]:
    """Credentials known by where they are written, with no word for them: a Wi-Fi QR code,
    a seed phrase of twelve words or more, a code's digits spaced out, an answer."""
    if "|" in text and "\n" in text:
        yield from _table(text)
    if "WIFI:" in text:
        for match in _WIFI_QR.finditer(text):
            yield "password", *match.span("v")
    seeds = _has_word_run(text) and _WALLET.search(text) is not None
    for match in _WORD_RUN.finditer(text) if seeds else ():
        words = match.group().split()
        if len(words) in {12, 15, 18, 21, 24} and not _PROSE_WORDS & set(words):
            yield "seed phrase", *match.span()
    if _FOUR_DIGITS.search(text):
        for match in _SPACED_CODE.finditer(text):
            yield "PIN or code", *match.span("v")
        for match in _KEYED_IN.finditer(text):
            if _OPENS_ANYWHERE.search(text, 0, match.start()) or _KEYED_CONTEXT.search(
                text, 0, match.start()
            ):
                yield "PIN or code", *match.span("v")
    for match in _APP_PASSWORD.finditer(text):
        letters = match.group().replace(match.group(1), "")
        if sum(c in _VOWELS for c in letters) < 0.3 * len(letters) and len(set(letters)) >= 8:
            yield "app password", *match.span()  # as Apple and Google print one
    if "-" in text:
        for match in _MAILGUN.finditer(text):
            yield "API key or token", *match.span()
    for match in _LOGIN_IS.finditer(text):
        value = match.group("v").rstrip(".,;:!?")
        if _strict(value):
            yield "password", match.start("v"), match.start("v") + len(value)
    if "?" in text:
        yield from _answered(text)
    low = text.lower()
    for match in _GIVEN.finditer(text) if any(w in low for w in _GIVEN_WORDS) else ():
        value = match.group("v").rstrip(".,;!?")
        if _strict(value) or (
            _secret_looking(value, code=False) and any(c in "!@#$%^&*?~_" for c in value)
        ):
            yield "password", match.start("v"), match.start("v") + len(value)


def _wifi_spelled(text: str) -> Iterator[tuple[str, int, int]]:
    """A Wi-Fi password spelled out after the network's name and a connector, with no
    password word: "guest wifi for sat: capital M, i, r, a, 2, 5, exclamation mark"."""
    for wifi in _WIFI.finditer(text):
        said = _SAID_AFTER_WIFI.match(text, wifi.end(), wifi.end() + 80)
        if said is None:
            continue
        spelled = _spelled_out(text, said.end())
        if spelled is not None:
            yield "password", *spelled
            continue
        pair = _NAME_SLASH.match(text, said.end())  # "wifi: NH-2F / sunflower0812"
        at = pair.end() if pair else said.end()
        word = _WIFI_VALUE.match(text, at)
        if word is None or _NOT_THE_KEY.search(text, wifi.end(), said.end()):
            continue  # "the wifi network name is ...", "its Wi-Fi MAC ...": not its password
        value = word.group(1).rstrip(".?")
        lower, upper, digit, symbol = _classes(value)
        words = re.fullmatch(r"[a-z]+(?:-[a-z]+){2,}", value) is not None
        if (
            (words or (lower and digit) or (symbol and (lower or upper) and digit))
            and not _VERSION.search(value)
            and not _HOST.fullmatch(value)
            and not re.fullmatch(r"\d+(?:[.,]\d+)?[a-zA-Z]{1,4}", value)  # "5GHz", "300mbps"
        ):
            yield "password", word.start(1), word.start(1) + len(value)  # "... is halden24"


_WIFI_HINT = re.compile(
    literal_alternation(["wifi", "wi-fi", "wi fi", "wlan", "ssid", "wpa", "вай", "ไวไฟ", "واي",
                         "와이파이"])
)  # fmt: skip
_NAME_SLASH = re.compile(r"[^\s/]{2,32}\s*/\s*")
# What else a Wi-Fi has that is said after it: its name, its addresses, its speed.
_NOT_THE_KEY = re.compile(
    r"(?i)\b(?:name|ssid|network|netz\w*|nom|nombre|naam|nazwa|mac|ip|address|adres\w*|router"
    r"|speed|band|channel|kanal|canal|signal|bssid|vlan|subnet|gateway|dns)\b"
)
_SAID_AFTER_WIFI = re.compile(
    r"[^.!?\n]{0,60}?(?::|\bis\b|\bè\b|\bes\b|\bist\b|\best\b|\bc'est\b|\bé\b|\bje\b|\bto\b)"
    r"(?:[ \t]*:)?[ \t]*"
)
# A password of letters, digits and a symbol, mixed case, 8 characters or more:
# "Lago_Booking2025", "Personel@24 -> Personel@25". Anywhere after a password word, as
# rotations and corrections give it ("the same as last year, i.e. ..."), when nothing else in
# the message read it.
_STRONG_WORD = re.compile(
    r"(?<![^\s\"'`«»“”(\[<,;:>→])[A-Za-z0-9!@#$%^&*._+\-?~]{8,40}(?![^\s\"'`«»“”)\]>,;:.!?])"
)
_STRONG_SYMBOLS = frozenset("!@#$%^&*._-+=?~")
_LETTERS_AND_DIGITS = re.compile(r"[A-Za-z][^\s]{0,38}\d|\d[^\s]{0,38}[A-Za-z]")


def _strong_later(text: str) -> Iterator[tuple[str, int, int]]:
    """Passwords that read as ones by themselves, after a password word of the message."""
    if _LETTERS_AND_DIGITS.search(text) is None:
        return  # (most messages: nothing to look for, and no keyword search)
    first = next(
        (
            k
            for k in _keywords(text)
            if text[k[0] : k[1]].casefold() in _PASSWORD_SET
            and not text[k[0] - 1 : k[0]].isalnum()
            and not text[k[1] : k[1] + 1].isalnum()
            and not said_of_something_else(text, *k)
        ),
        None,
    )
    if first is None:
        return
    for word in _STRONG_WORD.finditer(text, first[1]):
        value = word.group().rstrip(".:!?")
        lower, upper, digit, _ = _classes(value)
        if (
            len(value) >= 8
            and lower
            and upper
            and digit
            and any(c in _STRONG_SYMBOLS for c in value)
            and "/" not in value
            and not _EMAIL.search(value)
            and not _identifier(value)
        ):
            yield "password", word.start(), word.start() + len(value)


# A one-time code that arrived, with no code word before it: "the bank's SMS to authorise the
# payroll came: 847201", "je viens de recevoir 418 660" (round 10). A message says it arrived
# and what for, and holds six digits (or 3 and 3) that no id word names.
_ARRIVED = re.compile(
    r"(?i)\b(?:sms|texted|text(?:ed)? me|sent me|just got|received|came in|got a code|llegado"
    r"|llegó|recibido|recibí|reçu|recevoir|re[çc]ois|bekommen|erhalten|gekommen|ricevuto"
    r"|arrivato|arrivé|otrzyma\w*|przyszed\w*|przyszł\w*|chegou|recebi|ontvangen|gekregen"
    r"|получил\w*|пришёл|пришел|прийшов|отримав\w*|geldi|aldım|nhận được|dostałe?[mś]"
    r"|dostałam)"
)
_ARRIVED_FOR = re.compile(
    r"(?i)\b(?:code|codes|c[oó]digo|codice|kod|kode|koden|bank\w*|banco|banque|banca|autori[sz]\w*"
    r"|authori[sz]\w*|transfer\w*|verif\w*|confirm\w*|login|log in|sign[- ]in|otp|2fa|airbnb"
    r"|paypal|n[oó]minas?|payroll|virement|bonifico|przelew\w*|überweisung)"
)
_SIX_DIGITS = re.compile(r"\d{3} ?\d{3}")
_ARRIVED_VALUE = re.compile(
    r"(?i)(?<![\w#.,/\-])(?<!\d )(?:\d{6}|\d{3} \d{3})(?![\w/\-]|[.,]\d| \d)"
    r"(?!\s?(?:€|eur|usd|\$|%|kg|km|m²|zł|lei|ron|gbp|chf|pln|mxn))"
)
_NAMED_NUMBER = re.compile(
    r"(?i)(?:invoice|order|ticket|ref|no\.?|nr\.?|n°|#|booking|po|account|iban|tel|phone|room"
    r"|case|id|reservation|factura|pedido|commande|rechnung|bestellung|fattura|ordine|faktura"
    r"|zamówieni\w*|numer|number|número|numéro|nummer|numero|tracking|order)\W{0,3}$"
)


def _arrived_code(text: str) -> Iterator[tuple[str, int, int]]:
    if not _ARRIVED.search(text) or not _ARRIVED_FOR.search(text):
        return
    for value in _ARRIVED_VALUE.finditer(text):
        if not _NAMED_NUMBER.search(text, max(0, value.start() - 16), value.start()):
            yield "PIN or code", *value.span()


# What a code opens, in the languages a site crew writes in (round 10): a code word and one of
# these in one message, and a number a few words after the code word, is the code.
_LOCK_TEXT = (
    "door gate alarm safe lockbox lock-box lock keypad digilock barrier locker cabinet container "
    "siren entrance entry garage changing-room welfare fire-panel lift intercom keybox key-box "
    "keysafe key-safe puert porta porte portë portes portës dera derë tür deur drzwi dveř ajtó "
    "usa uşa ușa врат двер kapı cửa padlock bike-shed bikeshed shed storeroom store-room "
    "plant-room server-room kisanduku funguo boîte-à-clé khóa chìa interfon domofon citofono "
    "sprechanlage báo-động két mlango dury duru durų durvj ģērbtuv signaliz сигнал сейф замок "
    "sejf kasa trezor tresor kluis coffre caja-fuerte cofre cassaforte kutis çelës ਤਾਲ ਦਰਵਾਜ "
    "ताला दरवाज vestiar öltöz soyunma съблекалн persirengim szatni šatn vestuario spogliatoio "
    "umklede omklädn kufuli kłódk szaf letterbox mailbox postbox slagboom cancello κλειδοθήκη "
    "είσοδ cage briefkasten buzón boîte-aux-lettres"
)
_LOCK_WORDS = [w.replace("-", " ") for w in _LOCK_TEXT.split()]  # (a hyphen: a space)
# Words for what a lock is in scripts that join them to the words around (no boundary asked).
_LOCK_JOINED = (
    "金庫", "ロッカー", "キーボックス", "ドア", "门", "锁", "保险箱", "문", "도어", "금고", "إنذار",
    "انذار", "باب", "tür",
)  # fmt: skip
# Words that end where they stand ("safe", not "safety"; "porta", not "portal").
_LOCK_WHOLE = frozenset({"safe", "porta", "dera", "usa", "lift", "shed", "kasa", "két"})
_LOCK_SEARCH = re.compile(literal_alternation([*_LOCK_WORDS, *_LOCK_JOINED]))


def _locks(text: str, low: str | None = None) -> list[tuple[int, int, str]]:
    """Where the message names something a code opens (a door, a safe, a key box, an alarm), as
    (start, end, word), from one search over its lower case: a trie, not a long alternation."""
    low = lowered(text) if low is None else low
    found = []
    for match in _LOCK_SEARCH.finditer(low):
        word = match.group()
        start, end = match.span()
        if word not in _LOCK_JOINED and start and low[start - 1].isalpha():
            continue  # inside a word: "blockchain", "sunday"
        if word in _LOCK_WHOLE and end < len(low) and low[end].isalpha():
            continue  # "safety", "portal"
        found.append((start, end, text[start:end]))
    return found


# A word for a code, as a stem that takes endings (kodas, kodi, codul, кодът, ajtókódja), or
# one that does not inflect ("combi", "mã", "namba", "رمز").
_CODE_STEMS = ("kod", "kód", "cod", "cód", "код")
_CODE_WHOLE = (
    "code", "combi", "combo", "kombi", "mã", "namba", "ਕੋਡ", "कोड", "şifre", "sifre", "pin",
    "пин", "unset with", "disarm with",
)  # fmt: skip
_CODE_JOINED = ("رمز", "كود", "番号", "暗証番号", "비밀번호", "namba ya siri")
_CODE_SEARCH = re.compile(literal_alternation((*_CODE_STEMS, *_CODE_WHOLE, *_CODE_JOINED)))


def _code_words(text: str, low: str) -> Iterator[tuple[int, int]]:
    """Where the code words are (see _CODE_STEMS), each widened to its whole word."""
    for match in _CODE_SEARCH.finditer(low):
        start, end = match.span()
        word = match.group()
        if word in _CODE_JOINED:
            yield start, end
            continue
        if word in _CODE_STEMS:
            head = start
            while head > 0 and start - head < 8 and low[head - 1].isalpha():
                head -= 1
            tail = end
            while tail < len(low) and tail - end < 4 and low[tail].isalpha():
                tail += 1
            if (head and low[head - 1].isalpha()) or (tail < len(low) and low[tail].isalpha()):
                continue  # longer than a code word grows
            start, end = head, tail
        else:
            tail = end
            if word in {"şifre", "sifre"}:
                while tail < len(low) and tail - end < 3 and low[tail].isalnum():
                    tail += 1
            if (start and low[start - 1].isalpha()) or (tail < len(low) and low[tail].isalpha()):
                continue
            end = tail
        yield start, end


# Code words that name something else: a postcode, a barcode, an error or a product code.
_CODE_STEM_OTHER = re.compile(
    r"(?i)post|zip|bar|qr|decod|encod|unicod|promo|discount|voucher|rabatt|coupon|kodak|kodex"
    r"|codec|codex|coder|coding|codici|kodow|postal|pocztow|error|fehler|erreur|product|produkt"
    r"|article|artikel|shift|schicht|source|quell|review|area|vorwahl|country|swift|bic|iban"
    r"|tax|vat|hs|cpv|nace|sort|routing|dial|colou?r|color|farb|cost|kosten|project|projekt"
    r"|version|build|status|exit|return|http|response|event|reason"
)
_CODE_NUMBER = re.compile(
    r"(?<![\w.,:/\-])(?:\d{4,8}[#*]?|\d(?: \d){3,7}|\d(?:-\d){3,7}|\d{1,2}(?:-\d{1,2}){2,3})"
    r"(?![\w.,:/\-]*\d)(?!\s?(?:€|eur|usd|\$|%|kg|km|m²|m2|mm|cm|zł|lei|lv|pcs|stk|szt))"
)
_YEAR_SAID = re.compile(r"(?i)(?:\bin|since|from|of|en|im|w|в|desde|depuis|seit|dal|od)\s+$")


# What a lock is said to be, up to its number: "alarm old town: 1184", "CD safe westfield =
# 318824", "cabinet lock changed to 4471", "yard gate for the vans: #7720" (round 10).
_LOCK_SAID = re.compile(
    r"(?:[^.!?\n\d:=]|\.(?= [A-Z])){0,40}?(?:[:=→]|\bis\b|\bes\b|\best\b|\bist\b|\bè\b|\bé\b"
    r"|\bje\b|\bjest\b|\bnow\b|changed to|set to|\bnou[aă]?\b|neue?|nuevo|nueva|nouveau"
    r"|nouvelle|opens with|open with|s'ouvre avec|öffnet mit|se abre con|si apre con|abre com)"
    r"(?:[ \t]+(?:key in|punch in|tap in|type in|enter|press|dial|use|with))?[ \t]*#?"
)
# Locks whose number follows their name with nothing between: "keysafe by the back door 0912".
_KEY_LOCKS = re.compile(
    r"(?i)key ?safe|key ?box|lock ?box|padlock|combination|kombi|tresor|kluis|cofre|coffre"
    r"|cassaforte|caja fuerte|sejf|сейф|kisanduku|funguo|boîte à clés?|hộp chìa khóa|\bsafe\b"
)
# A number of a time, not a code: "at 0930", "1430 h", "till 1800".
_TIME_SAID = re.compile(
    r"(?i)(?:\bat|\bum|\bà|\ba las|\balle|\bfrom|\buntil|\btill|\bby|\bbefore"
    r"|\bafter|\bbis|\bab)\s*$"
)
_AFTER_TIME = re.compile(r"(?i)\s?(?:am|pm|h\b|hrs|uhr|uur|horas|heures)")
_COUNTED = re.compile(
    r"(?i)\s*(?:units?|pcs|items?|boxes|bags|tabs?|tablets|mg|ml|mins?|minutes|hours|days|people"
    r"|patients|doses|packs|cartons|bottles|pallets|stück|sztuk|unidades|pièces)\b"
)


_GAP_TO_DIGITS = re.compile(r"[^.!?\n\d]{0,40}?(?=\d)")
_TIMES_SIZE = re.compile(r"\s*[x×]\s*\d")
_CLAUSE_ENDS = re.compile(r"[ \t]*(?:[,.;!]|\n|$)")
_WIFI_VALUE = re.compile(r"[\"'«“]?([^\s\"'»”,;]{6,40})")


def _lock_numbers(text: str, locks: list[tuple[int, int, str]]) -> Iterator[tuple[str, int, int]]:
    """A lock named, then said to be a number: the number is its code."""
    for l_start, l_end, word in locks:
        if _GOODS_BEFORE.search(text, max(0, l_start - 40), l_start):
            continue  # "the product code for the padlock is 7045": the padlock's, not its code
        said = _LOCK_SAID.match(text, l_end)
        if said is None and _KEY_LOCKS.fullmatch(word) is None:
            continue
        start = said.end() if said is not None else l_end
        if said is None:
            gap = _GAP_TO_DIGITS.match(text, start)
            if gap is None:
                continue
            start = gap.end()
        number = _CODE_NUMBER.match(text, start)
        if number is None or _COUNTED.match(text, number.end()):
            continue
        if _TIMES_SIZE.match(text, number.end()):
            continue  # a size: "2110 x 926"
        value = number.group()
        if re.fullmatch(r"(?:[01]\d|2[0-3])[0-5]\d", value) and (
            _TIME_SAID.search(text, max(0, number.start() - 12), number.start())
            or _AFTER_TIME.match(text, number.end())
        ):
            continue
        if _NAMED_BETWEEN.search(text, l_end, number.start()):
            continue  # "gas safe no is 559121": the number of something
        yield "PIN or code", *number.span()


_GOODS_BEFORE = re.compile(
    r"(?i)\b(?:product|model|serial|part|article|item|sku|catalog(?:ue)?|price|size|order"
    r"|invoice|pzn|ean|barcode)\b"
)
_NAMED_BETWEEN = re.compile(
    r"(?i)\b(?:no|nr|n°|number|num|ref|id|serial|model|reg|registration|order|invoice|ticket"
    r"|booking|account|tel|phone|room|numer|número|numéro|nummer|numero)\b"
)


def _code_near_a_lock(text: str, low: str) -> Iterator[tuple[str, int, int]]:
    """A code word, something it opens in the same message, and a number a few words after
    the code word: "signalizacijos kodas sandėlyje 82736",
    "رمز باب المكتب في الموقع 8142", "hoarding gate combi is 5506" (round 10)."""
    for w_start, w_end in _code_words(text, low):
        if _CODE_STEM_OTHER.search(low, w_start, w_end) or said_of_something_else(
            text, w_start, w_end
        ):
            continue
        stop = min(len(text), w_end + 48)
        for end in (". ", "\n", "! ", "? ", "; "):
            at = text.find(end, w_end, stop)
            stop = at if at >= 0 else stop
        number = _CODE_NUMBER.search(text, w_end, stop)
        if number is None:
            continue
        between = text[w_end : number.start()]
        if re.search(r"\d{4,}", between) or _NAMED_NUMBER.search(text, w_end, number.start()):
            continue  # another number came first, or this one is named: "ticket 4521"
        value = number.group()
        if re.fullmatch(r"(?:19|20)\d\d", value) and _YEAR_SAID.search(between):
            continue  # "changed in 2024"
        yield "PIN or code", *number.span()


# One-time codes as services text them (round 10): "G-219845 is your Google verification code",
# "Use 3917 to verify your account", "Votre code de connexion : 604 288", "WhatsApp code 402-118".
_SMS_CODE = re.compile(
    r"(?P<a>(?:[A-Z]-)?\d{4,8}|\d{3}[ -]\d{3})\s+(?:is|est|es|ist|è|é|jest|je|este|er|är|on)\s+"
    r"(?:your|votre|ton|tu|su|dein|ihr|il tuo|twój|tw[oó]j|váš|tvůj|codul tău|din|uw|je|seu)\b"
    r"[^.\n]{0,40}?\b(?:code|c[oó]digo|codice|kod|kód|cod|PIN|OTP|password|passcode)"
    r"|(?i:\b(?:use|enter|utilisez|usa|use|introduce|introduzca|gib|verwende|wpisz|użyj|digite)"
    r"\s+)(?P<b>\d{4,8}|\d{3}[ -]\d{3})\s+(?i:to|pour|para|per|um|aby|para)\b"
    r"|(?i:\b(?:code|c[oó]digo|codice|kod|cod|kód)\b)[^\d\n.]{0,40}?(?P<c>\d{3}[ -]\d{3})(?![\d])"
)
_SMS_HINT = re.compile(
    literal_alternation(
        ["your", "votre", "ton ", "tu ", "su ", "dein", "ihr", "tuo", "twój", "twoj", "váš",
         "tvůj", "tău", "din ", "uw ", "seu", "use ", "enter", "utilisez", "usa ", "introduc",
         "gib ", "verwende", "wpisz", "użyj", "digite", "cod", "kod", "kód", "cód"]
    )
)  # fmt: skip
# A combination lock's turns: "32 left, 17 right, 5 left".
_SIDE = (
    r"(?:left|right|links|rechts|gauche|droite|izquierda|derecha|sinistra|destra|lewo|prawo"
    r"|L|R)\b"
)
_TURNS = re.compile(
    rf"(?i)(?<!\w)\d{{1,2}}\s*{_SIDE}(?:[,;\s]+(?:then\s+|dann\s+|puis\s+|luego\s+|poi\s+)?"
    rf"\d{{1,2}}\s*{_SIDE}){{2,}}"
    rf"|(?<!\w){_SIDE}\s*\d{{1,2}}(?:[,;\s]+(?:then\s+|dann\s+|puis\s+|luego\s+|poi\s+)?"
    rf"{_SIDE}\s*\d{{1,2}}){{2,}}(?!\d)"
)
# A password spelled in the phonetic alphabet: "kilo alpha lima echo seven seven bang".
_PHONETIC = frozenset(
    """
    alfa alpha bravo charlie delta echo foxtrot golf hotel india juliet juliett kilo lima mike
    november oscar papa quebec romeo sierra tango uniform victor whiskey whisky xray x-ray yankee
    zulu
    """.split()  # noqa: SIM905 (a word list reads best as prose)
)
_PHONETIC_SEARCH = re.compile(r"\b(?:" + literal_alternation(_PHONETIC) + r")\b")
_SPOKEN_SYMBOLS = frozenset(
    ["bang", "hash", "at", "dash", "underscore", "dot", "star", "exclamation", "dollar",
     "percent", "plus", "equals", "slash"]
)  # fmt: skip
# After a password's first part: "then 4490", "i potem 7781", "а далі 6287".
_THEN = re.compile(
    r"(?i)\b(?:then|and then|followed by|i potem|a potem|potem|а далі|далі|а потом|потом|dann"
    r"|danach|puis|ensuite|luego|después|poi|depois|sonra|apoi|dan|och sedan|og så)\s+"
    r"(?P<v>[^\s,;]{3,16})"
)
# The first part of a password given as its beginning: "pw starts with Ledger".
_STARTS_WITH = re.compile(
    r"(?i)\b(?:starts?\s+with|begins?\s+with|починається\s+з|начинается\s+с|zaczyna\s+się\s+od"
    r"|beginnt\s+mit|commence\s+par|empieza\s+(?:con|por)|inizia\s+(?:con|per)|começa\s+(?:com|por)"
    r"|begint\s+met|başlıyor|ile\s+başlar)\s+(?P<v>[^\s,;]{3,24})"
)
# A question's answer given for a security question: "security question is first car, answer X".
_SECURITY_ANSWER = re.compile(
    r"(?i)\b(?:security|secret|memorable)\s+(?:question|answer)\b[^\n]{0,80}?\banswer\b\W{0,3}"
    r"(?:is\s+)?(?P<v>[^\s,;]{4,40})"
)
_KEY_EMOJI = re.compile(r"🔑\ufe0f?\s*:?\s*(?P<v>[^\s,;]{4,64})")


def _sms_codes(text: str, low: str) -> Iterator[tuple[str, int, int]]:
    if _SMS_HINT.search(low) is None:
        return
    for match in _SMS_CODE.finditer(text):
        group = next(g for g in "abc" if match.group(g) is not None)
        start, end = match.span(group)
        if group == "c" and said_of_something_else(text, match.start(), match.start() + 4):
            continue  # "error code 402-118"
        yield "PIN or code", start, end
        digits = re.sub(r"\D", "", match.group(group))
        for again in re.finditer(rf"(?<!\d){digits}(?!\d)", text):
            if again.start() != start:
                yield "PIN or code", *again.span()  # the same code in the link beside it


def _spoken_letters(text: str, low: str) -> Iterator[tuple[str, int, int]]:
    if len(_PHONETIC_SEARCH.findall(low)) < 3:
        return
    run: list[re.Match[str]] = []
    for word in re.finditer(r"[^\W\d_]+(?:-[a-z]+)?", text):
        folded = word.group().casefold()
        if folded in _PHONETIC or folded in _NUMBER_WORDS or folded in _SPOKEN_SYMBOLS:
            if run and text[run[-1].end() : word.start()].strip(" ,"):
                run = []
            run.append(word)
            continue
        yield from _phonetic_run(run, text)
        run = []
    yield from _phonetic_run(run, text)


def _phonetic_run(run: list[re.Match[str]], text: str) -> Iterator[tuple[str, int, int]]:
    if (
        len(run) >= 4
        and sum(w.group().casefold() in _PHONETIC for w in run) >= 3
        and not _SPELLED_OTHER.search(text, max(0, run[0].start() - 40), run[0].start())
    ):
        yield "password", run[0].start(), run[-1].end()


# What else people spell in the phonetic alphabet: a postcode, a plate, a reference.
_SPELLED_OTHER = re.compile(
    r"(?i)post ?code|zip|plate|\breg\b|registration|call ?sign|\bref|reference|booking|flight"
    r"|surname|name|\bplz\b|code postal|c[oó]digo postal|kennzeichen|matr[ií]cula"
)


_TURN_HINT = re.compile(
    r"\d\s*(?:left|right|links|rechts|gauche|droite|izquierda|derecha|sinistra|destra|lewo|prawo"
    r"|l|r)\b|(?:left|right|links|rechts|gauche|droite|izquierda|derecha|sinistra|destra|lewo"
    r"|prawo)\s*\d"
)
_THEN_HINT = re.compile(
    literal_alternation(
        ["then", "followed by", "potem", "далі", "потом", "dann", "danach", "puis", "ensuite",
         "luego", "después", "poi", "depois", "sonra", "apoi", "dan ", "och sedan", "og så",
         "start", "begin", "почина", "начина", "zaczyna", "commence", "empieza", "inizia",
         "começa", "başl"]
    )
)  # fmt: skip


def _worded_more(text: str, low: str) -> Iterator[tuple[str, int, int]]:
    """Parts of a password given in words around it: the rest after "then", an answer to a
    security question, a value after a key emoji."""
    if "answer" in low:
        for match in _SECURITY_ANSWER.finditer(text):
            yield "password", *match.span("v")
    if "🔑" in text:
        for match in _KEY_EMOJI.finditer(text):
            value = match.group("v")
            if not _identifier(value) or "_" in value:
                yield "password", *match.span("v")
    if _TURN_HINT.search(low):
        for match in _TURNS.finditer(text):
            yield "PIN or code", *match.span()
    if _THEN_HINT.search(low) is None:
        return
    keywords = [k for k in _keywords(text) if text[k[0] : k[1]].casefold() in _PASSWORD_SET]
    for _, k_end in keywords[:3]:
        begins = _STARTS_WITH.search(text, k_end, k_end + 60)
        if begins is not None:
            value = begins.group("v").rstrip(".!?")
            yield "password", begins.start("v"), begins.start("v") + len(value)
        for then in _THEN.finditer(text, k_end, k_end + 120):
            value = then.group("v").rstrip(".!?")
            if any(c.isdigit() for c in value) and not _DATE.fullmatch(value):
                yield "password", then.start("v"), then.start("v") + len(value)
                head = re.search(r"(\S{3,24})\s+$", text[k_end : then.start()])
                if head is not None and head.group(1).isalpha() and head.group(1)[0].isupper():
                    at = k_end + head.start(1)
                    yield "password", at, at + len(head.group(1))  # "password Kestrel then"


def _read_out_by_a_lock(text: str) -> Iterator[tuple[str, int, int]]:
    """Digits read out one by one in a message about a lock, with no code word: "barrier at
    the service yard 1 9 9 0 enter", "container padlock is 0-4-8-1"."""
    for match in _READ_OUT_ALONE.finditer(text):
        yield "PIN or code", *match.span()


_THREE_SPACED = re.compile(r"\d[ \-]\d[ \-]\d")
_READ_OUT_ALONE = re.compile(r"(?<![\w.,:/\-])\d(?:([ \-])\d)(?:\1\d){2,6}(?![\w.,:/\-]*\d)")


# An authenticator's setup key as it is shown, in groups of four base32 characters ("MZXW 6YTB
# OI6Q 4WKR"), where the message speaks of two-factor setup.
_SEED_GROUPS = re.compile(r"(?<![\w-])[A-Z2-7]{4}(?: [A-Z2-7]{4}){3,}(?![\w-])")
_SEED_CONTEXT = re.compile(
    r"2fa|mfa|totp|otp|authenticator|setup.?key|secret key|two.factor|zwei.faktor|double "
    r"authentification|doble factor|dwuetapow|seed"
)
# Digits as keycap emoji: "4️⃣8️⃣1️⃣6️⃣".
_KEYCAPS = re.compile(r"(?:\d\ufe0f?\u20e3\s?){4,8}")


def _keycaps(text: str, low: str) -> Iterator[tuple[str, int, int]]:
    """A code written in keycap emoji, in a message that names a code, a password or a lock."""
    if not (_keywords(text) or _locks(text, low) or any(_code_words(text, low))):
        return
    for match in _KEYCAPS.finditer(text):
        yield "PIN or code", match.start(), match.start() + len(match.group().rstrip())


def chat_secrets(text: str) -> list[tuple[str, int, int]]:
    """The credentials said in ``text`` as chat says them: (kind, start, end), in the order
    the rules find them (they may overlap; the caller keeps the first). Never raises."""
    found: list[tuple[str, int, int]] = []
    low = lowered(text)
    if _FOUR_DIGITS.search(text):
        found += _spaced(text)
        locks = _locks(text, low)
        if locks:
            found += _code_near_a_lock(text, low)
            if _THREE_SPACED.search(text):
                found += _read_out_by_a_lock(text)
            found += _lock_numbers(text, locks)
        found += _sms_codes(text, low)
    found += _spoken_letters(text, low)
    found += _worded_more(text, low)
    if "\u20e3" in text:
        found += _keycaps(text, low)
    if _SEED_GROUPS.search(text) and _SEED_CONTEXT.search(low):
        found += (
            ("API key or token", *m.span())
            for m in _SEED_GROUPS.finditer(text)
            if sum(c.isdigit() for c in m.group()) >= 2  # random base32, not words in capitals
        )
    if _SIX_DIGITS.search(text):
        found += _arrived_code(text)
    found += _listed(text)
    if " -" in text or "/p:" in text or "|" in text or "%" in text:
        found += _flags(text)
    if any(w in low for w in _COMMAND_WORDS) or text.count(":") >= 4:
        found += _commands(text)
    found += _assignments(text)
    found += _after_keywords(text)
    found += _strong_later(text)
    if _WIFI_HINT.search(low):
        found += _wifi_spelled(text)
    found += _pairs(text)
    found += _spoken(text)
    found += _headers_and_markup(text)
    found += _looks_like_a_password(text)
    found += _shaped(text)
    if _LONG_WORD.search(text):
        found += _prefixed(text)
    found += _wrapped(text, found)
    return found
